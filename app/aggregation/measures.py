"""Measures (cost, latency, tokens) decided like scores: quantile checks with their
order-statistic interval, and relative margins on the log ratio of two means (docs/verdicts.md,
section 12)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from app.aggregation.stats import RESAMPLES, level_of

ORDER_STATISTIC = "order_statistic"
LOG_RATIO: Final = "paired_bootstrap_log_ratio"
# Pair indexes drawn at once by the log-ratio bootstrap (resamples x n), to bound memory.
_BLOCK_CELLS = 4_000_000


@dataclass(frozen=True)
class QuantileInterval:
    """The distribution-free interval of a q-quantile; an end that needs more values than
    there are is None."""

    level: float
    lower: float | None
    upper: float | None


def quantile_score(values: NDArray[np.float64], q: float) -> float:
    """The q-quantile as numpy's `inverted_cdf` gives it: a value of the sample."""
    return float(np.quantile(values, q, method="inverted_cdf"))


def _order_indexes(n: int, q: float, alpha: float) -> tuple[int, int]:
    """The 0-based order statistics bounding the q-quantile at level 1 - alpha (the lower
    index below 0, or the upper one at n or beyond, when that end does not exist): the same
    ranks as scipy's `quantile_test(...).confidence_interval`."""
    tail = alpha / 2.0
    binomial = stats.binom(n, q)
    return int(binomial.ppf(tail)) - 1, int(binomial.isf(tail))


def quantile_interval(values: NDArray[np.float64], q: float, alpha: float) -> QuantileInterval:
    """The two-sided order-statistic interval of the q-quantile at level 1 - alpha."""
    n = int(values.size)
    low, high = _order_indexes(n, q, alpha)
    wanted = [i for i in (low, high) if 0 <= i < n]
    ordered = np.partition(values, wanted) if wanted else values
    return QuantileInterval(
        level_of(alpha),
        float(ordered[low]) if 0 <= low < n else None,
        float(ordered[high]) if 0 <= high < n else None,
    )


def _both_ends(n: int, q: float, alpha: float) -> bool:
    low, high = _order_indexes(n, q, alpha)
    return low >= 0 and high < n


@cache
def minimum_n(q: float, alpha: float) -> int:
    """The fewest values whose q-quantile interval has both ends at level 1 - alpha.

    Both ends exist once q^n and (1 - q)^n fall to alpha / 2 (the chance that every value lies
    below, or above, the quantile); that n is computed, then the exact ranks are tried from a
    little before it."""
    tail = alpha / 2.0
    estimate = max(math.log(tail) / math.log(q), math.log(tail) / math.log1p(-q))
    n = max(1, math.floor(estimate) - 5)
    while not _both_ends(n, q, alpha):
        n += 1
    return n


@dataclass(frozen=True)
class LogRatio:
    """A relative comparison of two means of paired values: the (mirrored) log ratio, its
    percentile bootstrap interval and the one-sided bootstrap p-value."""

    statistic: float | None
    lower: float | None
    upper: float | None
    p_value: float
    level: float
    seed: int
    # Whether a mean was not above 0, so that no ratio exists (ratio_undefined).
    undefined: bool


def log_ratio_test(
    candidate: NDArray[np.float64],
    baseline: NDArray[np.float64],
    *,
    lower_is_better: bool,
    margin_relative: float,
    bar_sign: float,
    alpha: float,
    seed: int,
) -> LogRatio:
    """T = log(mean_c / mean_b), or log(mean_b / mean_c) when lower is better, so that a
    larger T is always an improvement; H0: T <= bar_sign * log(1 + margin_relative) (bar_sign
    -1 for non-inferiority, +1 for superiority). The p-value is the share of the seeded paired
    resamples whose T lies at or beyond that bar on the null's side."""
    level = level_of(alpha)
    n = int(candidate.size)
    mean_c = float(candidate.mean()) if n else 0.0
    mean_b = float(baseline.mean()) if n else 0.0
    if n == 0 or not (mean_c > 0.0 and mean_b > 0.0):
        return LogRatio(None, None, None, 1.0, level, seed, undefined=True)
    sign = -1.0 if lower_is_better else 1.0
    statistic = sign * (math.log(mean_c) - math.log(mean_b))
    resampled = sign * resampled_log_ratios(candidate, baseline, seed)
    bar = bar_sign * math.log1p(margin_relative)
    finite = resampled[np.isfinite(resampled)]
    p_value = float(np.count_nonzero(~(resampled > bar))) / RESAMPLES
    bounds: tuple[float | None, float | None] = (None, None)
    if finite.size:
        lower, upper = np.percentile(finite, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
        bounds = (float(lower), float(upper))
    return LogRatio(statistic, *bounds, p_value, level, seed, undefined=False)


def resampled_log_ratios(
    candidate: NDArray[np.float64], baseline: NDArray[np.float64], seed: int
) -> NDArray[np.float64]:
    """log(mean_c* / mean_b*) of RESAMPLES paired resamples: each draws n pair indexes with
    PCG64(seed), resample after resample (a resample whose mean is not above 0 gives -inf,
    inf or nan, which counts toward the null)."""
    n = int(candidate.size)
    rng = np.random.Generator(np.random.PCG64(seed))
    ratios = np.empty(RESAMPLES)
    block = max(1, _BLOCK_CELLS // n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for start in range(0, RESAMPLES, block):
            stop = min(RESAMPLES, start + block)
            indexes = rng.integers(0, n, size=(stop - start, n), dtype=np.int64)
            sums_c = np.take(candidate, indexes).sum(axis=1)
            sums_b = np.take(baseline, indexes).sum(axis=1)
            ratios[start:stop] = np.log(sums_c) - np.log(sums_b)
    return ratios
