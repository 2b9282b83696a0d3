"""Clustered inference of the second edition (docs/verdicts.md, section 10.3): the estimate is
the example-weighted mean, its standard error the CR1 cluster-robust one floored at the
independent one, and the reference Student's t with G - 1 degrees of freedom."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy import special

from app.aggregation.clusters import cluster_totals
from app.aggregation.rounding import Moments, r12
from app.aggregation.stats import level_of
from app.domain.results import Interval

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
INTERVAL_METHOD = "cluster_robust_t"
COMPARISON_METHOD: Final = "paired_t_cluster_robust"
DEFAULT_MIN_CLUSTERS = 5


@dataclass(frozen=True)
class RobustError:
    """A clustered mean's standard errors: CR1, the independent one, and the one decided on."""

    clusters: int
    cr1: float
    independent: float

    @property
    def se(self) -> float:
        """max(CR1, sd / sqrt(n)): clustering never makes a verdict more confident."""
        return max(self.cr1, self.independent)

    @property
    def df(self) -> int:
        """Degrees of freedom of the t reference: G - 1."""
        return self.clusters - 1


def cluster_count(clusters: IntArray) -> int:
    """How many distinct clusters the labels name."""
    return int(np.unique(clusters).size)


def robust_error(values: FloatArray, clusters: IntArray, sample: Moments) -> RobustError | None:
    """CR1 (statsmodels OLS on a constant, `cov_type="cluster"`) and sd/sqrt(n), by correctly
    rounded sums; None with fewer than 2 clusters or 2 values (no t reference)."""
    residual_sums, _ = cluster_totals(values - sample.mean, clusters)
    groups = int(residual_sums.size)
    independent = sample.se
    if groups < 2 or independent is None:
        return None
    cr1 = math.sqrt(groups / (groups - 1) * math.fsum(residual_sums**2)) / sample.n
    return RobustError(groups, cr1, independent)


def t_quantile(df: int, p: float) -> float:
    """Student's t quantile (scipy's stdtrit, the same number as stats.t.ppf)."""
    return float(special.stdtrit(df, p))


def robust_interval(
    estimate: float,
    error: RobustError,
    alpha: float,
    bounds: tuple[float, float] | None,
) -> Interval:
    """estimate +/- t(G - 1, 1 - alpha/2) se, clipped to `bounds`, rounded, holding the estimate."""
    half = t_quantile(error.df, 1.0 - alpha / 2.0) * error.se
    lower, upper = estimate - half, estimate + half
    if bounds is not None:
        lower, upper = max(bounds[0], lower), min(bounds[1], upper)
    return settle(Interval(INTERVAL_METHOD, level_of(alpha), lower, upper), estimate)


def robust_p_value(mean: float, error: RobustError, delta0: float) -> float:
    """One-sided p of H0: mean(d) <= delta0, t = (mean(d) - delta0) / se against t(G - 1),
    on the rounded mean and standard error."""
    se = r12(error.se)
    if se == 0.0:
        return 0.0 if mean > delta0 else 1.0
    return r12(float(special.stdtr(error.df, -(mean - delta0) / se)))


def settle(interval: Interval, estimate: float) -> Interval:
    """Bounds rounded to 12 digits and widened, if need be, to hold the (rounded) estimate."""
    lower, upper = r12(interval.lower), r12(interval.upper)
    return Interval(
        interval.method,
        interval.level,
        min(lower, estimate),
        max(upper, estimate),
        interval.resamples,
        interval.seed,
    )
