"""Clustered examples (docs/verdicts.md, section 7): the cluster bootstrap, the CR1
cluster-robust standard error of a mean, and the paired t-test over cluster means.

`clusters` is, per value, a small integer naming its cluster (any labels; only equality
matters). Everything is array arithmetic over clusters, never a loop over examples."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from app.aggregation.stats import GENERATOR, RESAMPLES, level_of
from app.domain.results import Interval

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
# Draws per block of the cluster bootstrap: about a million cluster indices at a time.
BLOCK_CELLS = 1_000_000


def cluster_totals(values: FloatArray, clusters: IntArray) -> tuple[FloatArray, FloatArray]:
    """Per cluster (in label order): the sum of its values and how many it has."""
    _, inverse = np.unique(clusters, return_inverse=True)
    sums: FloatArray = np.bincount(inverse, weights=values).astype(np.float64)
    counts: FloatArray = np.bincount(inverse).astype(np.float64)
    return sums, counts


def cluster_bootstrap(values: FloatArray, clusters: IntArray, alpha: float, seed: int) -> Interval:
    """Percentile interval of the mean, resampling clusters with replacement (2,000 draws):
    each drawn cluster brings all its values; the statistic is the mean over drawn values."""
    sums, counts = cluster_totals(np.asarray(values, dtype=np.float64), clusters)
    size = sums.size
    rng = np.random.Generator(np.random.PCG64(seed))
    means = np.empty(RESAMPLES)
    block = max(1, BLOCK_CELLS // size)
    for start in range(0, RESAMPLES, block):
        stop = min(RESAMPLES, start + block)
        drawn = rng.integers(0, size, size=(stop - start, size), dtype=np.int64)
        means[start:stop] = np.take(sums, drawn).sum(axis=1) / np.take(counts, drawn).sum(axis=1)
    lower, upper = np.percentile(means, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return Interval(
        f"cluster_bootstrap_percentile/{GENERATOR}",
        level_of(alpha),
        float(lower),
        float(upper),
        RESAMPLES,
        seed,
    )


def independent_se(values: FloatArray) -> float | None:
    """The standard error of a mean of independent values: sd (ddof 1) / sqrt(n)."""
    if values.size < 2:
        return None
    return float(np.std(values, ddof=1) / math.sqrt(values.size))


def clustered_se(values: FloatArray, clusters: IntArray) -> float | None:
    """The CR1 cluster-robust standard error of a mean (statsmodels OLS on a constant with
    `cov_type="cluster"`): sqrt(G / (G - 1) * sum_g (sum_{i in g} e_i)^2) / N."""
    n = values.size
    residual_sums, _ = cluster_totals(values - values.mean(), clusters)
    groups = residual_sums.size
    if n < 2 or groups < 2:
        return None
    return float(math.sqrt(groups / (groups - 1) * float(np.sum(residual_sums**2))) / n)


def design_effect(values: FloatArray, clusters: IntArray) -> float | None:
    """SE^2(clustered) / SE^2(independent) of the mean; None when either is undefined or 0."""
    clustered, independent = clustered_se(values, clusters), independent_se(values)
    if clustered is None or not independent:
        return None
    return (clustered / independent) ** 2


def cluster_means(differences: FloatArray, clusters: IntArray) -> FloatArray:
    """Each cluster's mean difference."""
    sums, counts = cluster_totals(differences, clusters)
    means: FloatArray = sums / counts
    return means


def clustered_p_value(differences: FloatArray, clusters: IntArray, delta0: float) -> float:
    """One-sided t-test of H0: mean <= delta0 over cluster means (df = C - 1); p = 1 with
    fewer than 2 clusters."""
    means = cluster_means(np.asarray(differences, dtype=np.float64), clusters)
    if means.size < 2:
        return 1.0
    if np.all(means == means[0]):
        return 0.0 if means[0] > delta0 else 1.0
    shifted = means - delta0
    standard_error = shifted.std(ddof=1) / math.sqrt(means.size)
    if standard_error == 0.0:
        return 0.0 if shifted.mean() > 0.0 else 1.0
    return float(stats.t.sf(shifted.mean() / standard_error, df=means.size - 1))
