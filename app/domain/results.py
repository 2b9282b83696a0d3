"""What the engine decides, as typed values: check and slice results, comparisons, intervals,
observations, reasons and the report's result; each knows its report-body form (as_body)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# A JSON object taken verbatim from a frozen suite (an aggregation, a scorer ref, a decision
# rule): the body repeats it as declared, so it is not re-typed here.
JsonObject = dict[str, Any]
# How a paired comparison was tested: a paired t-test, over cluster means (first edition), or
# with a cluster-robust variance (second edition).
ComparisonMethod = Literal[
    "paired_t",
    "paired_t_clustered",
    "paired_t_cluster_robust",
    "paired_t_cluster_jackknife",
    "paired_bootstrap_log_ratio",
    "ppi_plus_plus_z",
]


def _without_none(body: dict[str, Any], *optional: str) -> dict[str, Any]:
    """The body without those optional keys whose value is None (absent, not null)."""
    for key in optional:
        if body[key] is None:
            del body[key]
    return body


@dataclass(frozen=True)
class Interval:
    """A two-sided interval as the report body records it."""

    method: str
    level: float
    # An order-statistic interval's end that needs more values than there are is None.
    lower: float | None
    upper: float | None
    resamples: int | None = None
    seed: int | None = None
    # A judged check's PPI++ interval: its power-tuning lambda, labelled n and unlabelled N.
    lam: float | None = None
    labelled: int | None = None
    unlabelled: int | None = None

    @property
    def ends(self) -> tuple[float, float]:
        """Both ends, of an interval that has them (every interval but an order statistic's)."""
        assert self.lower is not None and self.upper is not None, "an interval without an end"
        return self.lower, self.upper

    def as_body(self) -> dict[str, object]:
        """The interval's report-body form (resamples and seed only for a bootstrap)."""
        body: dict[str, object] = {
            "method": self.method,
            "level": self.level,
            "lower": self.lower,
            "upper": self.upper,
        }
        if self.resamples is not None:
            body["resamples"] = self.resamples
            body["seed"] = self.seed
        if self.lam is not None:
            body["lambda"] = self.lam
            body["labelled"] = self.labelled
            body["unlabelled"] = self.unlabelled
        return body


@dataclass(frozen=True, slots=True)
class Coverage:
    """Examples expected, executed and missing (unexecuted) for a group or the report."""

    expected: int = 0
    executed: int = 0
    missing: int = 0
    # Judged checks: sampled executed examples without a counting label (None: not judged).
    labels_missing: int | None = None

    def __add__(self, other: Coverage) -> Coverage:
        labels_missing = (
            None
            if self.labels_missing is None and other.labels_missing is None
            else (self.labels_missing or 0) + (other.labels_missing or 0)
        )
        return Coverage(
            self.expected + other.expected,
            self.executed + other.executed,
            self.missing + other.missing,
            labels_missing,
        )

    def as_body(self) -> dict[str, int]:
        """`{expected, executed, missing}`, and `labels_missing` where labels were asked for."""
        body = {"expected": self.expected, "executed": self.executed, "missing": self.missing}
        if self.labels_missing is not None:
            body["labels_missing"] = self.labels_missing
        return body


@dataclass(frozen=True, slots=True)
class CasesTree:
    """A check's cases tree: how many leaves, and the RFC 6962 root (hex)."""

    count: int
    root: str

    def as_body(self) -> dict[str, Any]:
        """`{count, root}`."""
        return {"count": self.count, "root": self.root}


@dataclass(frozen=True, slots=True)
class BaselineRef:
    """What a check's comparison was against: the baseline's cases tree and report digest."""

    cases: CasesTree | None
    report_digest: str | None


@dataclass(frozen=True, slots=True)
class Comparison:
    """A paired comparison against the baseline (a check's names the baseline; a slice's does
    not)."""

    baseline_evaluation_id: str | None
    delta0: float
    pairs: int
    p_value: float
    p_adjusted: float
    family_size: int
    method: ComparisonMethod
    clusters: int | None = None
    baseline: BaselineRef | None = None

    def as_body(self) -> dict[str, Any]:
        """The `comparison` object of docs/report-body.md."""
        body: dict[str, Any] = {
            "baseline_evaluation_id": self.baseline_evaluation_id,
            "delta0": self.delta0,
            "pairs": self.pairs,
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
            "family_size": self.family_size,
            "method": self.method,
        }
        if self.clusters is not None:
            body["clusters"] = self.clusters
        if self.baseline is not None:
            tree = self.baseline.cases
            body["baseline_cases"] = None if tree is None else tree.as_body()
            body["baseline_report_digest"] = self.baseline.report_digest
        return body


@dataclass(frozen=True, slots=True)
class Observation:
    """A fact about a check's data (coded; `slice` names the slice it is about, if one)."""

    code: str
    count: int | None = None
    detail: Any = None
    slice: str | None = None

    def as_body(self) -> dict[str, Any]:
        """`{code, count?, detail?, slice?}`."""
        body = {"code": self.code, "count": self.count, "detail": self.detail, "slice": self.slice}
        return _without_none(body, "count", "detail", "slice")


@dataclass(frozen=True, slots=True)
class CheckNotPassed:
    """A required check that did not pass: the report's reason `check_<result>`."""

    check_id: str
    result: str
    status: str
    step: str

    def as_body(self) -> dict[str, Any]:
        """`{code, check_id, status, step}`."""
        return {
            "code": f"check_{self.result}",
            "check_id": self.check_id,
            "status": self.status,
            "step": self.step,
        }


@dataclass(frozen=True, slots=True)
class EvidenceIncomplete:
    """A required check with unexecuted or undigested examples."""

    check_id: str
    missing: int
    undigested: int

    def as_body(self) -> dict[str, Any]:
        """`{code: evidence_incomplete, check_id, missing, undigested}`."""
        return {
            "code": "evidence_incomplete",
            "check_id": self.check_id,
            "missing": self.missing,
            "undigested": self.undigested,
        }


@dataclass(frozen=True, slots=True)
class MeasureMissing:
    """A required measure check with examples unexecuted because a scored case lacks the
    measure."""

    check_id: str
    missing: int

    def as_body(self) -> dict[str, Any]:
        """`{code: measure_missing, check_id, missing}`."""
        return {"code": "measure_missing", "check_id": self.check_id, "missing": self.missing}


@dataclass(frozen=True, slots=True)
class LabelsMissing:
    """A required judged check with sampled examples still without a counting label."""

    check_id: str
    missing: int

    def as_body(self) -> dict[str, Any]:
        """`{code: labels_missing, check_id, missing}`."""
        return {"code": "labels_missing", "check_id": self.check_id, "missing": self.missing}


Reason = CheckNotPassed | EvidenceIncomplete | MeasureMissing | LabelsMissing


@dataclass(frozen=True, slots=True)
class SliceResult:
    """A slice's status, score, interval and comparison."""

    name: str
    required: bool
    status: str
    result: str
    score: float | None
    interval: Interval | None
    comparison: Comparison | None
    coverage: Coverage

    def as_body(self) -> dict[str, Any]:
        """The slice's object in its check's `slices`."""
        return {
            "name": self.name,
            "required": self.required,
            "status": self.status,
            "result": self.result,
            "score": self.score,
            "interval": None if self.interval is None else self.interval.as_body(),
            "comparison": None if self.comparison is None else self.comparison.as_body(),
            "coverage": self.coverage.as_body(),
        }


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A check's result: status, score, interval, comparison, slices and evidence."""

    check_id: str
    required: bool
    status: str
    result: str
    aggregation: JsonObject
    scorer_ref: JsonObject
    assurance: str
    evidence_refs: list[str]
    evidence_manifest: bool
    score: float | None
    interval: Interval | None
    comparison: Comparison | None
    explanation: str
    coverage: Coverage
    cases: CasesTree
    observations: tuple[Observation, ...]
    slices: tuple[SliceResult, ...]
    # A measure check's `{of, name}`.
    measure: JsonObject | None = None
    # A judged check's calibration: the declaration, what the labels gave, the labels' root.
    calibration: JsonObject | None = None

    def as_body(self) -> dict[str, Any]:
        """The check's object in the body's `checks` (`measure` only on a measure check)."""
        body = {
            "check_id": self.check_id,
            "required": self.required,
            "status": self.status,
            "result": self.result,
            "aggregation": self.aggregation,
            "scorer_ref": self.scorer_ref,
            "assurance": self.assurance,
            "evidence_refs": self.evidence_refs,
            "evidence_manifest": self.evidence_manifest,
            "score": self.score,
            "interval": None if self.interval is None else self.interval.as_body(),
            "comparison": None if self.comparison is None else self.comparison.as_body(),
            "explanation": self.explanation,
            "coverage": self.coverage.as_body(),
            "cases": self.cases.as_body(),
            "observations": [o.as_body() for o in self.observations],
            "slices": [s.as_body() for s in self.slices],
        }
        if self.measure is not None:
            body["measure"] = self.measure
        if self.calibration is not None:
            body["calibration"] = self.calibration
        return body


@dataclass(frozen=True, slots=True)
class ReportResult:
    """The engine's part of a report: the decision rule, result, assurance, reasons, checks and
    coverage."""

    decision_rule: JsonObject
    result: str
    assurance: str
    evidence_complete: bool
    reasons: tuple[Reason, ...]
    checks: tuple[CheckResult, ...]
    coverage: Coverage

    def as_body(self) -> dict[str, Any]:
        """The engine's keys of the report body."""
        return {
            "decision_rule": self.decision_rule,
            "result": self.result,
            "assurance": self.assurance,
            "evidence_complete": self.evidence_complete,
            "reasons": [r.as_body() for r in self.reasons],
            "checks": [c.as_body() for c in self.checks],
            "coverage": self.coverage.as_body(),
        }
