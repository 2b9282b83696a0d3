"""Scorer, dataset and suite version bodies and answers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from app.digest.strictjson import MAX_SAFE_INTEGER
from app.domain.vocabulary import Better, Correction, Rule
from app.schemas.base import AnswerModel, StrictModel
from app.schemas.common import JSON_INT, AnyJSON, Digest, Identifier, SafeFloat, ShortText

Probability = Annotated[float, Field(ge=0.0, le=1.0)]


class ScorerVersionIn(StrictModel):
    """PUT body of a scorer version."""

    definition: dict[str, AnyJSON]
    score_range: Annotated[list[SafeFloat], Field(min_length=2, max_length=2)] | None = None

    @model_validator(mode="after")
    def _range_is_ordered(self) -> ScorerVersionIn:
        if self.score_range is not None and not self.score_range[0] < self.score_range[1]:
            raise ValueError("score_range must be [lo, hi] with lo < hi")
        return self


class ScorerVersionOut(AnswerModel):
    """A registered scorer version."""

    name: str
    version: str
    digest: str
    definition: dict[str, Any]
    score_range: list[float] | None
    retired: bool
    created_at: datetime


class ExampleIn(StrictModel):
    """One example of a dataset version."""

    id: Identifier
    body: AnyJSON
    tags: list[ShortText] = Field(default_factory=list)


class DatasetVersionIn(StrictModel):
    """PUT body of a dataset version (JSON form; NDJSON sends one ExampleIn a line)."""

    examples: list[ExampleIn] = Field(min_length=1)


class ExampleOut(AnswerModel):
    """An example as read back; `body` only with dataset.read_body and before retention."""

    id: str
    tags: list[str]
    body_digest: str
    body: Any = None
    body_available: bool


class DatasetVersionOut(AnswerModel):
    """A registered dataset version."""

    name: str
    version: str
    digest: str
    example_count: int
    created_at: datetime
    examples: list[ExampleOut] | None = None


class RefIn(StrictModel):
    """A reference to a scorer or dataset version by name and version."""

    name: Identifier
    version: Identifier


class AllPassIn(StrictModel):
    """Every example must pass; no threshold."""

    method: Literal["all_pass"]
    threshold: None = None


class PassRateIn(StrictModel):
    """The share of passing examples, against a threshold in [0, 1]."""

    method: Literal["pass_rate"]
    threshold: Probability


class MinAggregationIn(StrictModel):
    """The minimum of the examples' scores, against a threshold."""

    method: Literal["min"]
    threshold: SafeFloat


class MeanAggregationIn(StrictModel):
    """The mean of the examples' scores (or measure values), against a threshold."""

    method: Literal["mean"]
    threshold: SafeFloat
    better: Better = Field(
        default="higher", description="lower: pass at or below the threshold, every rule mirrored"
    )
    margin_relative: Annotated[SafeFloat, Field(gt=0.0, le=1000.0)] | None = Field(
        default=None,
        description="measure checks under non_inferiority or superiority: compare the log "
        "ratio of the means, 'at most this share worse' (0.3: 30 %)",
    )


class QuantileAggregationIn(StrictModel):
    """The q-quantile of a measure's example values, against a threshold."""

    method: Literal["quantile"]
    q: Annotated[float, Field(gt=0.0, lt=1.0)]
    threshold: SafeFloat
    better: Better = "higher"


# How a check's example values become a score; the method decides what the threshold is.
AggregationIn = Annotated[
    AllPassIn | PassRateIn | MeanAggregationIn | MinAggregationIn | QuantileAggregationIn,
    Field(discriminator="method"),
]


class MeasureRefIn(StrictModel):
    """What a measure check reads: the measure `name` on the cases of the check `of`."""

    of: Identifier
    name: Identifier


class CalibrationIn(StrictModel):
    """A judged check: its judge's values corrected by human labels on a random sample of its
    examples (prediction-powered inference, PPI++)."""

    method: Literal["ppi"]
    label_fraction: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        description="the share of examples the service asks a human to label"
    )
    min_labels: Annotated[int, Field(ge=2, le=MAX_SAFE_INTEGER), JSON_INT] = Field(
        default=30, description="fewer counting labels than this: inconclusive, too_few_labels"
    )
    sample_seed: Annotated[str, Field(min_length=1, max_length=200)] | None = Field(
        default=None, description="what the sample is drawn with (default: the dataset's name)"
    )


# Examples sharing a tag with this prefix (`passage:`, `repo:`) are not independent.
ClusterPrefix = ShortText


class SliceIn(StrictModel):
    """A slice: the check's examples carrying `tag`."""

    name: Identifier
    tag: ShortText
    required: bool = False
    threshold: SafeFloat | None = None
    cluster_tag_prefix: ClusterPrefix | None = Field(
        default=None, description="clusters of this slice (default: the check's)"
    )


class CheckIn(StrictModel):
    """One check of a suite version."""

    check_id: Identifier
    required: bool = True
    scorer: RefIn | None = Field(default=None, description="required unless `measure` is given")
    dataset: RefIn | None = Field(default=None, description="required unless `measure` is given")
    measure: MeasureRefIn | None = Field(
        default=None,
        description="a measure check: no cases, scorer or dataset of its own; it reads the "
        "measure on the cases of the check `of`",
    )
    repeats: Annotated[int, Field(ge=1, le=1000), JSON_INT] = 1
    aggregation: AggregationIn
    min_coverage: Probability = 1.0
    min_samples: Annotated[int, Field(ge=1, le=MAX_SAFE_INTEGER), JSON_INT] = 1
    slices: list[SliceIn] = Field(default_factory=list)
    cluster_tag_prefix: ClusterPrefix | None = Field(
        default=None,
        description="an example's cluster is its one tag starting with this prefix "
        "(pass_rate and mean only)",
    )
    min_clusters: Annotated[int, Field(ge=2, le=MAX_SAFE_INTEGER), JSON_INT] | None = Field(
        default=None,
        description="with clusters: fewer clusters than this make the check (or slice) "
        "inconclusive, too_few_clusters (default 5)",
    )
    calibration: CalibrationIn | None = Field(
        default=None,
        description="a judged check (pass_rate or mean, repeats 1, no clusters): corrected by "
        "human labels on a sample the service draws",
    )

    @model_validator(mode="after")
    def _calibrated_where_defined(self) -> CheckIn:
        if self.calibration is None:
            return self
        if self.measure is not None:
            raise ValueError("calibration applies to a scored check, not a measure check")
        if self.aggregation.method not in ("pass_rate", "mean"):
            raise ValueError(
                f"calibration applies to pass_rate and mean checks, not {self.aggregation.method}"
            )
        if self.repeats != 1:
            raise ValueError("calibration needs repeats 1: a label scores one output")
        if self.cluster_tag_prefix is not None or any(
            item.cluster_tag_prefix is not None for item in self.slices
        ):
            raise ValueError("calibration with clusters (cluster_tag_prefix) is not defined")
        return self

    @model_validator(mode="after")
    def _measure_or_scored(self) -> CheckIn:
        if self.measure is not None:
            if self.scorer is not None or self.dataset is not None:
                raise ValueError("a measure check has neither scorer nor dataset")
            if "repeats" in self.model_fields_set:
                raise ValueError("a measure check takes the repeats of the check it measures")
            if self.aggregation.method not in ("mean", "quantile"):
                raise ValueError("a measure check aggregates by mean or quantile")
            return self
        if self.scorer is None or self.dataset is None:
            raise ValueError("a check needs a scorer and a dataset, or a measure")
        if self.aggregation.method == "quantile":
            raise ValueError("quantile applies to measure checks")
        if getattr(self.aggregation, "margin_relative", None) is not None:
            raise ValueError("margin_relative applies to measure checks")
        return self


class DecisionRuleIn(StrictModel):
    """The suite version's decision rule; `family` is computed, never sent."""

    rule: Rule = "threshold"
    alpha: Annotated[float, Field(gt=0.0, le=0.5)] = 0.05
    margin: Annotated[SafeFloat, Field(ge=0.0)] = 0
    correction: Correction = "none"


class SuiteVersionIn(StrictModel):
    """PUT body of a suite version."""

    validity_hours: Annotated[float, Field(gt=0, le=24 * 3650)]
    decision_rule: DecisionRuleIn = Field(default_factory=DecisionRuleIn)
    checks: list[CheckIn] = Field(min_length=1)
    reevaluation_spending: Literal["none", "geometric"] = Field(
        default="none",
        description="geometric: the k-th gate report of a subject decides at "
        "alpha (1 - 0.2) 0.2^(k - 1), so re-running until green stays within alpha "
        "(not with the rule threshold, which decides on the point estimate)",
    )

    @model_validator(mode="after")
    def _spending_can_act(self) -> SuiteVersionIn:
        if self.reevaluation_spending != "none" and self.decision_rule.rule == "threshold":
            raise ValueError(
                "reevaluation_spending cannot act under the rule threshold, which decides on "
                "the point estimate and uses no alpha: choose interval, non_inferiority or "
                "superiority, or spending none"
            )
        return self


class SuiteVersionOut(AnswerModel):
    """A frozen suite version."""

    name: str
    version: str
    digest: Digest
    status: Literal["active", "inactive"]
    content: dict[str, Any]
    created_at: datetime


class SuiteVersionSummary(AnswerModel):
    """One version in a suite listing."""

    version: str
    digest: str
    status: Literal["active", "inactive"]
    created_at: datetime


class SuiteOut(AnswerModel):
    """A suite with its versions."""

    name: str
    active_version: str | None
    versions: list[SuiteVersionSummary]


class ActivationOut(AnswerModel):
    """Answer of an activation."""

    name: str
    version: str
    superseded_report_ids: list[str]


class ScorerList(AnswerModel):
    """A page of scorer versions, newest first."""

    scorers: list[ScorerVersionOut]
    next_cursor: str | None


class DatasetVersionListed(AnswerModel):
    """A dataset version as listed (its examples: GET the version)."""

    name: str
    version: str
    digest: str
    example_count: int
    created_at: datetime


class DatasetList(AnswerModel):
    """A page of dataset versions, newest first."""

    datasets: list[DatasetVersionListed]
    next_cursor: str | None


class SuiteListed(AnswerModel):
    """A suite as listed: its name and the version new evaluations run."""

    name: str
    active_version: str | None
    created_at: datetime


class SuiteList(AnswerModel):
    """A page of suites, newest first."""

    suites: list[SuiteListed]
    next_cursor: str | None
