"""The report's result from its required checks: fail over error over inconclusive, pass only
when every required check passed with complete evidence; with the reasons, the weakest
assurance and the summed coverage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Verdict:
    """The required checks counted toward the report's result, assurance and coverage."""

    coverage: dict[str, int] = field(
        default_factory=lambda: {"expected": 0, "executed": 0, "missing": 0}
    )
    assurances: list[int] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    reasons: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = True

    def count(self, check: Any, body: dict[str, Any]) -> None:
        """Count a required check: its assurance, result, coverage, and why it did not pass."""
        stats = check.stats
        self.assurances.append(stats.assurance if stats.assurance is not None else 0)
        self.results.append(body["result"])
        for key in self.coverage:
            self.coverage[key] += stats.coverage[key]
        if body["result"] != "pass":
            self.reasons.append(
                {
                    "code": f"check_{body['result']}",
                    "check_id": check.check_id,
                    "status": check.status,
                    "step": check.step,
                }
            )
        if stats.unexecuted or stats.undigested:
            self.complete = False
            self.reasons.append(
                {
                    "code": "evidence_incomplete",
                    "check_id": check.check_id,
                    "missing": stats.unexecuted,
                    "undigested": stats.undigested,
                }
            )

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
