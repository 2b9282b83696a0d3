"""Planning a run: POST /evaluations/api/power and GET /evaluations/api/reports/{id}/power."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.schemas.base import AnswerModel, StrictModel
from app.schemas.common import SafeFloat


class PowerIn(StrictModel):
    """What to detect: a change of `effect` from `baseline` (a pass rate, or a standard
    deviation for `mean` and `paired`), one-sided at `alpha` with `power`."""

    method: Literal["pass_rate", "mean", "paired"]
    baseline: Annotated[SafeFloat, Field(description="p for pass_rate; the sd otherwise")]
    effect: Annotated[SafeFloat, Field(json_schema_extra={"not": {"const": 0}})]
    alpha: Annotated[float, Field(gt=0.0, le=0.5)] = 0.05
    power: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.8
    correlation: Annotated[float, Field(ge=-1.0, lt=1.0)] | None = Field(
        default=None,
        description="paired runs of pass_rate or mean: the correlation of a run's and its "
        "baseline's values (default 0, the conservative choice; the answer echoes it)",
    )
    design_effect: Annotated[float, Field(ge=1.0, le=1e6)] | None = None
    design: Literal["one_sample", "two_runs", "paired"] | None = Field(
        default=None,
        description="one run against a threshold, two independent runs (the default), or "
        "paired runs (method paired implies it)",
    )
    alternative: Literal["larger", "two-sided"] = Field(
        default="larger", description="one-sided (larger), or two-sided as the interval rule"
    )


class PowerOut(AnswerModel):
    """Examples needed (per run for pass_rate and mean; pairs for paired)."""

    n: int
    formula: str
    correlation: float | None = Field(
        default=None, description="the correlation a paired plan assumed (none for others)"
    )


class ReportPowerOut(AnswerModel):
    """The same, from a report's observed variance, in the design and sides of the check's rule."""

    report_id: str
    check: str
    effect: float
    alpha: float
    power: float
    se: float
    observed_n: int
    clustered: bool
    n: int | None
    formula: str
    design: Literal["one_sample", "two_runs", "paired"]
    alternative: Literal["larger", "two-sided"]
