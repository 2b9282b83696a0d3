"""The report page's judged check (docs/verdicts.md, section 13): the corrected score beside the
judge's own, λ, n of N, how far the judge agrees with the labels, and the labels still needed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The 2 x 2 table's cells, in the order the page draws them: judge's verdict by row, the
# label's by column.
CELLS = (
    ("pass", "judge_pass_label_pass", "judge_pass_label_fail"),
    ("fail", "judge_fail_label_pass", "judge_fail_label_fail"),
)


@dataclass(frozen=True)
class JudgedView:
    """One judged check as the page shows it."""

    score: float | None
    lower: float | None
    upper: float | None
    judge_score: float | None
    lam: float | None
    labelled: int
    executed: int
    fraction: float
    min_labels: int
    # The agreement as stored: a 2 x 2 table, agreement, kappa, sensitivity and specificity on
    # a pass_rate check; bias and its sd on a mean check.
    agreement: dict[str, Any]
    pass_fail: bool
    labels_missing: int
    too_few: int
    judge_biased: bool

    @property
    def rows(self) -> list[tuple[str, int, int]]:
        """The 2 x 2 table's rows: the judge's verdict, then the labels' pass and fail counts."""
        table = self.agreement.get("table") or {}
        return [(word, table.get(yes, 0), table.get(no, 0)) for word, yes, no in CELLS]

    @property
    def still_needed(self) -> str | None:
        """What labels the verdict still waits for, in words (None: none)."""
        if not self.labels_missing and not self.too_few:
            return None
        parts = []
        if self.too_few:
            parts.append(
                f"{self.too_few} more {'label' if self.too_few == 1 else 'labels'} before the "
                f"corrected verdict can decide (at least {self.min_labels})"
            )
        if self.labels_missing:
            parts.append(
                f"{self.labels_missing} sampled "
                f"{'example' if self.labels_missing == 1 else 'examples'} without a label, so "
                "the evidence is incomplete and the report cannot pass"
            )
        return "; ".join(parts)


def judged_view(check: dict[str, Any]) -> JudgedView | None:
    """A check's judged view, or None for a check without calibration."""
    calibration = check.get("calibration")
    if not calibration:
        return None
    interval = check.get("interval") or {}
    labelled = int(calibration.get("labelled") or 0)
    executed = labelled + int(calibration.get("unlabelled") or 0)
    minimum = int(calibration.get("min_labels") or 0)
    too_few = "too_few_labels" in (check.get("explanation") or "")
    observations = check.get("observations") or []
    return JudgedView(
        score=check.get("score"),
        lower=interval.get("lower"),
        upper=interval.get("upper"),
        judge_score=calibration.get("judge_score"),
        lam=calibration.get("lambda"),
        labelled=labelled,
        executed=executed,
        fraction=float(calibration.get("label_fraction") or 0.0),
        min_labels=minimum,
        agreement=calibration.get("agreement") or {},
        pass_fail=(check.get("aggregation") or {}).get("method") == "pass_rate",
        labels_missing=int((check.get("coverage") or {}).get("labels_missing") or 0),
        too_few=max(0, minimum - labelled) if too_few else 0,
        judge_biased=any(o.get("code") == "judge_bias" for o in observations),
    )
