"""Intervals, paired tests and family-wise corrections (docs/verdicts.md, sections 5 and 6).

Everything is vectorized: no Python loop over cases or resamples.
"""

from __future__ import annotations

import hashlib
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray
from scipy import special, stats

from app.domain.results import Interval

RESAMPLES = 2000
GENERATOR = "pcg64"
# Resampling counts over distinct values draws from the same distribution as resampling
# indices, and is far cheaper when values take few distinct levels (pass/fail, repeats).
MAX_DISTINCT_FOR_COUNTS = 256
# Index resampling in blocks of about a million draws keeps memory at ~16 MB whatever the
# number of examples, and each block in cache (measured fastest on this machine).
INDEX_BLOCK_CELLS = 1_000_000
# Index resampling draws from this many streams spawned from the seed (RESAMPLES / 8 each).
INDEX_STREAMS = 8

FloatArray = NDArray[np.float64]


def bootstrap_seed(evaluation_id: str, check_id: str, slice_name: str | None = None) -> int:
    """First 6 bytes, big-endian, of sha256("<evaluation_id>/<check_id>[/<slice>]")."""
    name = f"{evaluation_id}/{check_id}" + ("" if slice_name is None else f"/{slice_name}")
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:6], "big")


def level_of(alpha: float) -> float:
    """The interval level 1 - alpha, rounded to remove binary noise (0.95, not 0.9500000001)."""
    return round(1.0 - alpha, 12)


def wilson(passes: float, n: float, alpha: float) -> Interval:
    """Wilson score interval without continuity correction, bounds clipped to [0, 1]
    (fractional counts allowed: the third edition's effective sample size)."""
    z = float(special.ndtri(1.0 - alpha / 2.0))
    p = passes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
    return Interval("wilson", level_of(alpha), max(0.0, centre - half), min(1.0, centre + half))


def _index_means(values: FloatArray, rng: np.random.Generator, resamples: int) -> FloatArray:
    n = values.size
    sums = np.empty(resamples)
    block = max(1, INDEX_BLOCK_CELLS // n)
    for start in range(0, resamples, block):
        stop = min(resamples, start + block)
        indices = rng.integers(0, n, size=(stop - start, n), dtype=np.int64)
        sums[start:stop] = np.take(values, indices).sum(axis=1)
    return sums / n


def _resample_means(values: FloatArray, seed: int) -> tuple[FloatArray, str]:
    n = values.size
    # More distinct values in a prefix than the counts method takes: no need to count them all.
    few_levels = np.unique(values[: 4 * MAX_DISTINCT_FOR_COUNTS]).size <= MAX_DISTINCT_FOR_COUNTS
    if few_levels:
        levels, frequencies = np.unique(values, return_counts=True)
        if levels.size <= MAX_DISTINCT_FOR_COUNTS:
            rng = np.random.Generator(np.random.PCG64(seed))
            counts = rng.multinomial(n, frequencies / n, size=RESAMPLES)
            return (counts @ levels) / n, f"{GENERATOR}/counts"
    # A fixed number of independent streams spawned from the seed, one per share of the
    # resamples: the result does not depend on how many threads draw them.
    streams = [
        np.random.Generator(np.random.PCG64(child))
        for child in np.random.SeedSequence(seed).spawn(INDEX_STREAMS)
    ]
    share = RESAMPLES // INDEX_STREAMS
    workers = min(INDEX_STREAMS, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        parts = list(pool.map(lambda rng: _index_means(values, rng, share), streams))
    return np.concatenate(parts), f"{GENERATOR}x{INDEX_STREAMS}/indices"


def bootstrap(values: FloatArray, alpha: float, seed: int) -> Interval:
    """Seeded percentile bootstrap interval of the mean (2,000 resamples over examples)."""
    means, way = _resample_means(np.asarray(values, dtype=np.float64), seed)
    lower, upper = np.percentile(means, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return Interval(
        f"bootstrap_percentile/{way}",
        level_of(alpha),
        float(lower),
        float(upper),
        RESAMPLES,
        seed,
    )


def paired_p_value(differences: FloatArray, delta0: float) -> float:
    """One-sided paired t-test p-value of H0: mean(d) <= delta0 (docs/verdicts.md, section 6)."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return 1.0
    if np.all(d == d[0]):
        return 0.0 if d[0] > delta0 else 1.0
    shifted = d - delta0
    mean = shifted.mean()
    standard_error = shifted.std(ddof=1) / math.sqrt(d.size)
    if standard_error == 0.0:
        # Differences equal up to rounding: decide as for exactly equal ones.
        return 0.0 if mean > 0.0 else 1.0
    return float(stats.t.sf(mean / standard_error, df=d.size - 1))


def adjust(p_values: list[float], correction: str) -> list[float]:
    """Family-wise adjusted p-values: none, bonferroni (min(1, m p)) or holm (step-down)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0 or correction == "none":
        return [float(x) for x in p]
    if correction == "bonferroni":
        return [float(x) for x in np.minimum(1.0, p * m)]
    if correction != "holm":
        raise ValueError(f"unknown correction {correction!r}")
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return [float(x) for x in adjusted]
