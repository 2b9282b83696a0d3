"""Clustered inference (docs/verdicts.md, sections 10.3 and 11): the estimate is the
example-weighted mean, its standard error the cluster-robust one (CR1 in the second edition, the
cluster jackknife CV3 from the third) floored at the independent one, and the reference
Student's t with G - 1 degrees of freedom. From the third edition a clustered pass rate's
interval is the hull of that t interval and the Wilson interval at the effective sample size."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy import special

from app.aggregation.clusters import cluster_totals
from app.aggregation.rounding import Moments, r12
from app.aggregation.stats import level_of, wilson
from app.domain.results import Interval

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
INTERVAL_METHOD = "cluster_robust_t"
COMPARISON_METHOD: Final = "paired_t_cluster_robust"
JACKKNIFE_INTERVAL_METHOD = "cluster_jackknife_t"
JACKKNIFE_COMPARISON_METHOD: Final = "paired_t_cluster_jackknife"
HULL_METHOD = "cluster_robust_t_wilson_hull"
DEFAULT_MIN_CLUSTERS = 5


@dataclass(frozen=True)
class RobustError:
    """A clustered mean's standard errors: the cluster-robust one (CR1, or CV3 when
    `jackknife`), the independent one, and the one decided on."""

    clusters: int
    clustered: float
    independent: float
    jackknife: bool = False

    @property
    def se(self) -> float:
        """max(clustered, sd / sqrt(n)): clustering never makes a verdict more confident."""
        return max(self.clustered, self.independent)

    @property
    def design_effect(self) -> float | None:
        """SE^2(clustered) / SE^2(independent); None without independent variance."""
        if self.independent == 0.0:
            return None
        return (self.clustered / self.independent) ** 2

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


def jackknife_error(values: FloatArray, clusters: IntArray, sample: Moments) -> RobustError | None:
    """CV3, the cluster jackknife as pyfixest computes CRV3 for `y ~ 1` with its default
    small-sample factor: se^2 = G / (G - 1) * sum_g (theta_(-g) - theta)^2, theta_(-g) the mean
    without cluster g (docs/decisions/0021); and sd/sqrt(n). None with fewer than 2 clusters
    or 2 values."""
    sums, counts = cluster_totals(values, clusters)
    groups = int(sums.size)
    independent = sample.se
    if groups < 2 or independent is None:
        return None
    without = (sample.total - sums) / (sample.n - counts)
    spread = math.fsum((without - sample.mean) ** 2)
    return RobustError(groups, math.sqrt(groups / (groups - 1) * spread), independent, True)


def clustered_error(
    values: FloatArray, clusters: IntArray, sample: Moments, jackknife: bool
) -> RobustError | None:
    """CV3 (the third edition) or CR1 (the second), floored at the independent error."""
    if jackknife:
        return jackknife_error(values, clusters, sample)
    return robust_error(values, clusters, sample)


def hull_interval(
    interval: Interval, error: RobustError, examples: int, score: float, alpha: float
) -> Interval:
    """The hull of the clustered t interval and the Wilson interval at the effective sample size
    n_eff = n / max(1, design effect), k_eff = score * n_eff (fractional counts): a clustered
    pass rate is never more confident than the same examples taken as independent."""
    effect = error.design_effect
    effective = examples / max(1.0, effect if effect is not None else 1.0)
    independent = wilson(score * effective, effective, alpha)
    return settle(
        Interval(
            HULL_METHOD,
            interval.level,
            min(interval.ends[0], independent.ends[0]),
            max(interval.ends[1], independent.ends[1]),
        ),
        score,
    )


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
    method = JACKKNIFE_INTERVAL_METHOD if error.jackknife else INTERVAL_METHOD
    return settle(Interval(method, level_of(alpha), lower, upper), estimate)


def robust_p_value(mean: float, error: RobustError, delta0: float) -> float:
    """One-sided p of H0: mean(d) <= delta0, t = (mean(d) - delta0) / se against t(G - 1),
    on the rounded mean and standard error."""
    se = r12(error.se)
    if se == 0.0:
        return 0.0 if mean > delta0 else 1.0
    return r12(float(special.stdtr(error.df, -(mean - delta0) / se)))


def settle(interval: Interval, estimate: float) -> Interval:
    """Bounds rounded to 12 digits and widened, if need be, to hold the (rounded) estimate."""
    lower, upper = (r12(end) for end in interval.ends)
    return Interval(
        interval.method,
        interval.level,
        min(lower, estimate),
        max(upper, estimate),
        interval.resamples,
        interval.seed,
    )
