"""How far the judge agrees with the human labels on the labelled examples (docs/judges.md,
section 3): for a pass rate the 2 x 2 table, agreement, Cohen's kappa, sensitivity and
specificity; for a mean, the judge's mean error and its spread."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.aggregation.rounding import r12


def _share(part: int, whole: int) -> float | None:
    """part / whole, rounded; None for an empty whole."""
    return None if whole == 0 else r12(part / whole)


def _kappa(table: dict[str, int], n: int) -> float | None:
    """Cohen's kappa of the 2 x 2 table; None when chance agreement is certain (kappa 0/0)."""
    agreed = (table["judge_pass_label_pass"] + table["judge_fail_label_fail"]) / n
    judge_pass = (table["judge_pass_label_pass"] + table["judge_pass_label_fail"]) / n
    label_pass = (table["judge_pass_label_pass"] + table["judge_fail_label_pass"]) / n
    chance = judge_pass * label_pass + (1 - judge_pass) * (1 - label_pass)
    if chance >= 1.0:
        return None
    return r12((agreed - chance) / (1.0 - chance))


def pass_fail_agreement(judged: NDArray[np.float64], labels: NDArray[np.float64]) -> dict[str, Any]:
    """The 2 x 2 table of judge against label and what it says (labelled examples only)."""
    judge_pass, label_pass = judged == 1.0, labels == 1.0
    table = {
        "judge_pass_label_pass": int((judge_pass & label_pass).sum()),
        "judge_pass_label_fail": int((judge_pass & ~label_pass).sum()),
        "judge_fail_label_pass": int((~judge_pass & label_pass).sum()),
        "judge_fail_label_fail": int((~judge_pass & ~label_pass).sum()),
    }
    n = int(labels.size)
    agreed = table["judge_pass_label_pass"] + table["judge_fail_label_fail"]
    return {
        "table": table,
        "agreement": _share(agreed, n),
        "kappa": _kappa(table, n) if n else None,
        "sensitivity": _share(table["judge_pass_label_pass"], int(label_pass.sum())),
        "specificity": _share(table["judge_fail_label_fail"], int((~label_pass).sum())),
    }


def mean_agreement(judged: NDArray[np.float64], labels: NDArray[np.float64]) -> dict[str, Any]:
    """The judge's bias (mean of judge - label) and its standard deviation (n - 1)."""
    errors = judged - labels
    n = int(errors.size)
    return {
        "bias": r12(math.fsum(errors) / n) if n else None,
        "bias_sd": r12(float(errors.std(ddof=1))) if n >= 2 else None,
    }


def agreement(
    method: str, judged: NDArray[np.float64], labels: NDArray[np.float64]
) -> dict[str, Any]:
    """The judge's agreement with the labels, by the check's method."""
    if method == "pass_rate":
        return pass_fail_agreement(judged, labels)
    return mean_agreement(judged, labels)
