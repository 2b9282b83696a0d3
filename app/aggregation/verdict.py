"""The report's result from its required checks: fail over error over inconclusive, pass only
when every required check passed with complete evidence; with the reasons, the weakest
assurance and the summed coverage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.domain.results import (
    CheckNotPassed,
    CheckResult,
    Coverage,
    EvidenceIncomplete,
    LabelsMissing,
    MeasureMissing,
    Reason,
)
from app.domain.vocabulary import ASSURANCE_RANK, REASON_RANK

MEASURE_MISSING = REASON_RANK["measure_missing"]

if TYPE_CHECKING:
    from app.aggregation.outcome import Outcome


@dataclass
class Verdict:
    """The required checks counted toward the report's result, assurance and coverage."""

    coverage: Coverage = field(default_factory=Coverage)
    assurances: list[int] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    reasons: list[Reason] = field(default_factory=list)
    complete: bool = True

    def count(self, check: Outcome, result: CheckResult) -> None:
        """Count a required check: its assurance, result, coverage, and why it did not pass."""
        stats = check.stats
        self.assurances.append(ASSURANCE_RANK[result.assurance])
        self.results.append(result.result)
        self.coverage += result.coverage
        if result.result != "pass":
            self.reasons.append(
                CheckNotPassed(check.check_id, result.result, check.status, check.step)
            )
        if stats.unexecuted or stats.undigested:
            self.complete = False
            self.reasons.append(
                EvidenceIncomplete(check.check_id, stats.unexecuted, stats.undigested)
            )
        missing_measure = int(stats.reason_counts[MEASURE_MISSING])
        if missing_measure:
            self.reasons.append(MeasureMissing(check.check_id, missing_measure))
        # An unlabelled sampled example is the one a labeller would skip: not complete.
        if result.coverage.labels_missing:
            self.complete = False
            self.reasons.append(LabelsMissing(check.check_id, result.coverage.labels_missing))

    def result(self) -> str:
        """fail over error over inconclusive; pass only when every required check passed with
        complete evidence."""
        if "fail" in self.results:
            return "fail"
        if "error" in self.results:
            return "error"
        if self.complete and all(r == "pass" for r in self.results):
            return "pass"
        return "inconclusive"
