"""Prediction-powered inference for a mean with power tuning (PPI++; docs/judges.md, section 3):
the judge's values over every example, corrected by its measured error on a random labelled
sample. The numbers are those of ppi-python 0.2.3's `ppi_mean_ci`, `ppi_mean_pointestimate`
and `ppi_mean_pval` (the tests' oracle), written out so that the service does not depend on it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

FloatArray = NDArray[np.float64]
PPI_METHOD = "ppi_plus_plus_z"
# ppi-python's floor under the standard error of a p-value (a constant judge and labels).
MIN_SE = 1e-16


@dataclass(frozen=True)
class PPIEstimate:
    """θ, its standard error, the power-tuning λ, and the labelled (n) and unlabelled (N)
    counts."""

    theta: float
    se: float
    lam: float
    labelled: int
    unlabelled: int

    def interval(self, alpha: float) -> tuple[float, float]:
        """θ ± z(1 − alpha/2) · se, unclipped."""
        half = float(special.ndtri(1.0 - alpha / 2.0)) * self.se
        return self.theta - half, self.theta + half

    def p_larger(self, null: float) -> float:
        """The one-sided p-value of θ > null (the z statistic's upper tail)."""
        z = (self.theta - null) / max(self.se, MIN_SE)
        return float(special.ndtr(-z))


def tuned_lambda(labels: FloatArray, judged: FloatArray, unlabelled: FloatArray) -> float:
    """λ = clip(cov(Y, Ŷ_L) / ((1 + n/N) var₁(Ŷ)), 0, 1); 0 when the judge's values have no
    variance (the formula is 0/0) or nothing is unlabelled."""
    n, big_n = labels.size, unlabelled.size
    if big_n == 0 or n + big_n < 2:
        return 0.0
    covariance = float(((labels - labels.mean()) * (judged - judged.mean())).sum()) / n
    variance = float(np.var(np.concatenate([judged, unlabelled]), ddof=1))
    if variance == 0.0:
        return 0.0
    return min(1.0, max(0.0, covariance / ((1.0 + n / big_n) * variance)))


def ppi_mean(
    labels: FloatArray, judged: FloatArray, unlabelled: FloatArray, lam: float | None = None
) -> PPIEstimate:
    """The PPI++ estimate of a mean from the labels `Y`, the judge's values on the labelled
    examples `Ŷ_L` and on the others `Ŷ_U`; with everything labelled, the classical mean."""
    n, big_n = labels.size, unlabelled.size
    if n == 0:
        raise ValueError("PPI needs at least one label")
    if lam is None:
        lam = tuned_lambda(labels, judged, unlabelled)
    rectifier = labels - lam * judged
    if big_n == 0:
        return PPIEstimate(float(labels.mean()), float(labels.std()) / math.sqrt(n), 0.0, n, 0)
    imputed = lam * unlabelled
    theta = float(imputed.mean()) + float(rectifier.mean())
    se = math.sqrt(float(imputed.std()) ** 2 / big_n + float(rectifier.std()) ** 2 / n)
    return PPIEstimate(theta, se, lam, n, big_n)
