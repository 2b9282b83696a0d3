"""Paired comparisons against a baseline (docs/verdicts.md, sections 6, 7 and 10): pairing,
the paired (or cluster-robust) t-test, and the comparison's report-body form."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray
from scipy import special

from app.aggregation.clusters import clustered_p_value
from app.aggregation.groups import GroupStats
from app.aggregation.looks import Rules
from app.aggregation.measures import LOG_RATIO, log_ratio_test
from app.aggregation.robust import (
    COMPARISON_METHOD,
    JACKKNIFE_COMPARISON_METHOD,
    cluster_count,
    clustered_error,
    robust_interval,
    robust_p_value,
)
from app.aggregation.rounding import Moments, r12
from app.aggregation.stats import RESAMPLES, bootstrap_seed, paired_p_value
from app.domain.results import BaselineRef, Comparison, ComparisonMethod, Interval

if TYPE_CHECKING:
    from app.aggregation.outcome import Outcome


def rounded_paired_p_value(sample: Moments, delta0: float) -> float:
    """Second edition: the one-sided paired t-test on the rounded mean and standard error."""
    if sample.n < 2:
        return 1.0
    mean = r12(sample.mean)
    se = r12(sample.se or 0.0)
    if sample.constant or se == 0.0:
        return 0.0 if mean > delta0 else 1.0
    return r12(float(special.stdtr(sample.n - 1, -(mean - delta0) / se)))


def paired_examples(
    outcome: Outcome, baseline: GroupStats | None
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """The examples executed in both, with the candidate's and the baseline's values."""
    candidate = outcome.stats
    if baseline is None:
        outcome.unpaired = candidate.executed
        empty = np.empty(0, dtype=np.float64)
        return np.empty(0, dtype=np.int64), empty, empty
    paired_index, in_candidate, in_baseline = np.intersect1d(
        candidate.executed_index, baseline.executed_index, return_indices=True
    )
    outcome.unpaired = candidate.executed + baseline.executed - 2 * paired_index.size
    return paired_index, candidate.values[in_candidate], baseline.values[in_baseline]


def compare(
    outcome: Outcome, baseline: GroupStats | None, rules: Rules, evaluation_id: str
) -> None:
    """Pair the candidate's executed examples with the baseline's; score, interval and p.

    The difference is candidate - baseline, or baseline - candidate when lower is better, so
    that a positive difference is always an improvement; a relative margin compares the log
    ratio of the means instead (app.aggregation.measures)."""
    alpha, delta0 = rules.alpha, rules.delta0
    outcome.comparative = True
    outcome.facts["delta0"] = delta0
    paired_index, candidate_values, baseline_values = paired_examples(outcome, baseline)
    if outcome.margin_relative is not None:
        _compare_relative(outcome, rules, candidate_values, baseline_values, evaluation_id)
        return
    pairs = candidate_values - baseline_values
    if outcome.lower_is_better:
        pairs = -pairs
    outcome.pairs = int(pairs.size)
    outcome.sample = pairs
    if outcome.cluster_of is not None:
        outcome.clusters = outcome.cluster_of[paired_index]
    outcome.evaluable = outcome.early is None and pairs.size >= max(2, outcome.min_samples)
    if outcome.second_edition:
        _compare_rounded(outcome, alpha, delta0, evaluation_id)
        return
    outcome.score = float(pairs.mean()) if pairs.size else None
    if pairs.size:
        seed = bootstrap_seed(evaluation_id, outcome.check_id, outcome.slice_name)
        outcome.resample = (pairs, seed, outcome.clusters)
    if not outcome.evaluable:
        outcome.p_value = 1.0
    elif outcome.clusters is not None:
        outcome.p_value = clustered_p_value(pairs, outcome.clusters, delta0)
    else:
        outcome.p_value = paired_p_value(pairs, delta0)


def _compare_relative(
    outcome: Outcome,
    rules: Rules,
    candidate: NDArray[np.float64],
    baseline: NDArray[np.float64],
    evaluation_id: str,
) -> None:
    """The relative margin: the mirrored log ratio of the paired means, its bootstrap interval
    and p-value; no ratio when a mean is not above 0 (inconclusive, ratio_undefined)."""
    assert outcome.margin_relative is not None
    outcome.pairs = int(candidate.size)
    outcome.evaluable = outcome.early is None and candidate.size >= max(2, outcome.min_samples)
    found = log_ratio_test(
        candidate,
        baseline,
        lower_is_better=outcome.lower_is_better,
        margin_relative=outcome.margin_relative,
        bar_sign=-1.0 if rules.rule == "non_inferiority" else 1.0,
        alpha=rules.alpha,
        seed=bootstrap_seed(evaluation_id, outcome.check_id, outcome.slice_name),
    )
    outcome.facts["delta0"] = r12(
        (-1.0 if rules.rule == "non_inferiority" else 1.0) * math.log1p(outcome.margin_relative)
    )
    outcome.facts["relative"] = True
    if found.undefined:
        outcome.p_value = 1.0
        if outcome.early is None and candidate.size:
            outcome.early = ("inconclusive", "ratio_undefined")
        outcome.evaluable = False
        return
    assert found.statistic is not None
    outcome.score = r12(found.statistic)
    if found.lower is not None and found.upper is not None:
        outcome.interval = Interval(
            LOG_RATIO, found.level, r12(found.lower), r12(found.upper), RESAMPLES, found.seed
        )
    outcome.p_value = r12(found.p_value) if outcome.evaluable else 1.0


def _compare_rounded(outcome: Outcome, alpha: float, delta0: float, evaluation_id: str) -> None:
    """The second edition: fsum, 12 digits, and cluster-robust inference with clusters."""
    pairs = outcome.sample
    assert pairs is not None
    outcome.p_value = 1.0
    if not pairs.size:
        return
    sample = outcome.moments()
    outcome.score = r12(sample.mean)
    if outcome.clusters is None:
        seed = bootstrap_seed(evaluation_id, outcome.check_id, outcome.slice_name)
        outcome.resample = (pairs, seed, None)
        if outcome.evaluable:
            outcome.p_value = rounded_paired_p_value(sample, delta0)
        return
    outcome.robust = clustered_error(pairs, outcome.clusters, sample, outcome.third_edition)
    if outcome.robust is None:
        return
    outcome.interval = robust_interval(outcome.score, outcome.robust, alpha, outcome.bounds)
    if outcome.evaluable:
        outcome.p_value = robust_p_value(outcome.score, outcome.robust, delta0)


def comparison_of(
    outcome: Outcome, baseline_id: str | None, delta0: float, baseline: BaselineRef | None = None
) -> Comparison | None:
    """The comparison of a check (`baseline` given) or slice; None when it compares nothing."""
    if not outcome.comparative:
        return None
    method: ComparisonMethod = "paired_t"
    clusters = None
    if "ppi" in outcome.facts:
        method = "ppi_plus_plus_z"
    elif outcome.facts.get("relative"):
        method = LOG_RATIO
        delta0 = outcome.facts["delta0"]
    elif outcome.clusters is not None:
        method = "paired_t_clustered"
        if outcome.third_edition:
            method = JACKKNIFE_COMPARISON_METHOD
        elif outcome.second_edition:
            method = COMPARISON_METHOD
        clusters = cluster_count(outcome.clusters)
    return Comparison(
        baseline_evaluation_id=baseline_id,
        delta0=delta0,
        pairs=outcome.pairs,
        p_value=outcome.p_value,
        p_adjusted=outcome.p_adjusted,
        family_size=outcome.family_size,
        method=method,
        clusters=clusters,
        baseline=baseline,
    )
