"""Human labels of judged checks (docs/judges.md): the bodies and answers of labels/requested
and of posting labels."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.schemas.base import AnswerModel, StrictModel
from app.schemas.common import AnyJSON, Identifier, SafeFloat, Text

PassFail = Literal["pass", "fail"]


class LabelIn(StrictModel):
    """One human label: the person's score of the output the judge scored."""

    check_id: Identifier
    example_id: Identifier
    label: PassFail | SafeFloat = Field(
        description="pass or fail on a pass_rate check; a number in the scorer's score_range "
        "on a mean check"
    )
    labeller: Identifier = Field(description="who labelled it")
    note: Annotated[Text, Field(max_length=2000)] | None = None


class LabelBatchIn(StrictModel):
    """POST body of labels (NDJSON sends one LabelIn a line)."""

    labels: list[LabelIn] = Field(min_length=1)


class LabelBatchOut(AnswerModel):
    """Labels stored now, and identical re-sends."""

    accepted: int
    unchanged: int


class RequestedLabel(AnswerModel):
    """A sampled example of a judged check: what to label, and whether a label is held."""

    check_id: str
    example_id: str
    labelled: bool
    status: str | None = Field(description="the case's status (null: no case yet)")
    input: AnyJSON = Field(default=None, description="the example's body, with dataset.read_body")
    output: AnyJSON = Field(
        default=None, description="the output the judge scored, with dataset.read_body"
    )


class RequestedLabels(AnswerModel):
    """A page of the examples the service asks a human to label."""

    evaluation_id: str
    requested: list[RequestedLabel]
    # Per judged check: sampled examples, and how many of them hold a label.
    totals: dict[str, dict[str, int]]
    next_cursor: str | None
