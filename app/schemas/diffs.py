"""The diff of two reports (documentation of what the endpoints write; docs/changes.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class DiffSide(BaseModel):
    """One of the two reports."""

    report_id: str
    digest: str
    evaluation_id: str
    suite_ref: dict[str, Any]
    subject_digest: str
    issued_at: str
    result: str
    status: str


class TransitionPage(BaseModel):
    """Example ids of one transition of one check, in example id byte order."""

    check_id: str
    transition: str = Field(description="before-after outcomes, e.g. pass-fail")
    count: int
    example_ids: list[str]
    next_cursor: str | None


class McNemar(BaseModel):
    """McNemar's exact test on the examples executed in both reports."""

    method: str
    pairs: int
    b: int = Field(description="pass -> fail")
    c: int = Field(description="fail -> pass")
    p_value: float


class PairedDifference(BaseModel):
    """The mean paired difference (after - before) and its seeded bootstrap interval."""

    pairs: int
    estimate: float | None
    interval: dict[str, Any] | None
    method: str | None = None


class GroupDiff(BaseModel):
    """A matched check or one of its slices."""

    name: str | None = None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    score_change: float | None
    own_score: dict[str, float | None]
    transitions: dict[str, int]
    changed_examples: int
    mcnemar: McNemar
    difference: PairedDifference


class CheckDiff(GroupDiff):
    """A check in both reports."""

    check_id: str
    method: str
    outcome_measure: str
    cases_proven_against: dict[str, dict[str, Any] | None]
    top_drops: list[dict[str, Any]]
    top_gains: list[dict[str, Any]] = Field(default_factory=list)
    slices: list[GroupDiff]
    changes: list[TransitionPage]


class MeasureChange(BaseModel):
    """One example's measure in both reports (its mean over the repeats)."""

    example_id: str
    before: float
    after: float
    change: float


class MeasureChanges(BaseModel):
    """A measure check in both reports: the examples whose measure changed most."""

    check_id: str
    measure: dict[str, str]
    better: str
    largest_changes: list[MeasureChange] = Field(description="top 20 by absolute change")


class LabelChange(BaseModel):
    """An example labelled in both reports, with another label after."""

    example_id: str
    before: str | float
    after: str | float
    labeller_before: str
    labeller_after: str


class JudgedSide(BaseModel):
    """A judged check in one report: θ, the judge's own score, its labels and their root."""

    score: float | None
    judge_score: float | None
    labelled: int | None
    labels_root: str | None


class LabelChanges(BaseModel):
    """A check judged in both reports: how its human labels changed (example id order)."""

    check_id: str
    before: JudgedSide
    after: JudgedSide
    changed_count: int
    changed: list[LabelChange] = Field(description="the first 100")
    only_after_count: int
    only_after: list[str] = Field(description="labelled after only; the first 100")
    only_before_count: int
    only_before: list[str] = Field(description="labelled before only; the first 100")
    unchanged: int


class ReportDiffOut(BaseModel):
    """What changed from `before` to `after`."""

    after: DiffSide
    before: DiffSide
    checks: list[CheckDiff]
    unmatched_checks: dict[str, list[str]]
    measures: list[MeasureChanges] = Field(
        default_factory=list,
        description="per measure check in both reports, the examples whose measure changed most",
    )
    labels: list[LabelChanges] = Field(
        default_factory=list,
        description="per check judged in both reports, how its human labels changed",
    )


class HistoryReport(BaseModel):
    """One gate report of a suite's history."""

    report_id: str
    issued_at: str
    subject_digest: str
    suite_version: str
    result: str
    status: str
    superseded_by: str | None
    checks: dict[str, dict[str, Any]] = Field(
        description="check id -> score, interval {lower, upper}, result, comparative"
    )


class SuiteHistory(BaseModel):
    """A suite's gate reports, oldest first."""

    suite: str
    reports: list[HistoryReport]
