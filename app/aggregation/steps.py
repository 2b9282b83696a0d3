"""The steps that settle one check or slice (docs/verdicts.md, sections 3 to 5 and 12): its
score and interval, the early steps (missing, already failed, not enough evidence, too few
clusters), and the decision by its rule, mirrored where lower is better."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from app.aggregation.measures import (
    ORDER_STATISTIC,
    minimum_n,
    quantile_interval,
    quantile_score,
)
from app.aggregation.outcome import Outcome
from app.aggregation.robust import (
    cluster_count,
    clustered_error,
    hull_interval,
    robust_interval,
    settle,
)
from app.aggregation.rounding import r12
from app.aggregation.stats import bootstrap_seed, wilson
from app.domain.results import Interval
from app.domain.vocabulary import COMPARATIVE_METHODS, PASS_FAIL_METHODS

# The methods the interval rule decides by their interval.
INTERVAL_RULE_METHODS = (*COMPARATIVE_METHODS, "quantile")


def score_and_interval(outcome: Outcome, repeats: int, alpha: float, evaluation_id: str) -> None:
    stats = outcome.stats
    if stats.executed == 0:
        return
    values = stats.values
    seed = bootstrap_seed(evaluation_id, outcome.check_id, outcome.slice_name)
    second = outcome.second_edition
    if outcome.method == "min":
        lowest = float(values.min())
        outcome.score = r12(lowest) if second else lowest
        return
    if outcome.method == "quantile":
        _quantile(outcome, values, alpha)
        return
    outcome.sample = values
    outcome.score = r12(outcome.moments().mean) if second else float(values.mean())
    if outcome.cluster_of is not None:
        outcome.clusters = outcome.cluster_of[stats.executed_index]
        if not second:
            outcome.resample = (values, seed, outcome.clusters)
            return
        outcome.robust = clustered_error(
            values, outcome.clusters, outcome.moments(), outcome.third_edition
        )
        if outcome.robust is not None:
            outcome.interval = robust_interval(outcome.score, outcome.robust, alpha, outcome.bounds)
            if outcome.third_edition and outcome.method == "pass_rate":
                outcome.interval = hull_interval(
                    outcome.interval, outcome.robust, int(values.size), outcome.score, alpha
                )
    elif outcome.method in PASS_FAIL_METHODS and repeats == 1:
        interval = wilson(stats.passes, stats.executed, alpha)
        outcome.interval = settle(interval, outcome.score) if second else interval
    else:
        outcome.resample = (values, seed, None)


def _quantile(outcome: Outcome, values: NDArray[np.float64], alpha: float) -> None:
    """A quantile check's score (a value of the sample) and its order-statistic interval."""
    assert outcome.q is not None
    outcome.score = r12(quantile_score(values, outcome.q))
    found = quantile_interval(values, outcome.q, alpha)
    outcome.interval = Interval(
        ORDER_STATISTIC,
        found.level,
        None if found.lower is None else r12(found.lower),
        None if found.upper is None else r12(found.upper),
    )
    if found.lower is None or found.upper is None:
        outcome.facts["quantile_n"] = {"n": int(values.size), "n_min": minimum_n(outcome.q, alpha)}


def too_few_clusters(outcome: Outcome) -> None:
    """Second edition: a clustered group with fewer than `min_clusters` clusters cannot tell.
    Third: that is decided after every other early step (an outage stays an error)."""
    if not outcome.second_edition or outcome.clusters is None or outcome.clusters.size == 0:
        return
    settled = ("missing", "already_failed")
    if outcome.early is not None and (outcome.third_edition or outcome.early[1] in settled):
        return
    count = cluster_count(outcome.clusters)
    outcome.facts["clusters"] = count
    if count < outcome.min_clusters:
        outcome.early = ("inconclusive", "too_few_clusters")
        outcome.evaluable = False
        outcome.p_value = 1.0


def _can_fail_early_on_values(outcome: Outcome, rule: str) -> bool:
    """Whether a pass_rate or mean check may already fail on its executed values: under the
    rule threshold only, with a threshold, and not when a judge's values await their
    correction by labels."""
    return not (
        rule != "threshold"
        or outcome.threshold is None
        or outcome.method == "quantile"
        or outcome.judged
    )


def _already_failed(outcome: Outcome, rule: str, score_range: tuple[float, float] | None) -> bool:
    stats = outcome.stats
    threshold = outcome.threshold
    if outcome.method == "all_pass":
        return stats.any_scored_fail
    if outcome.method == "min":
        lowest = stats.min_scored_score
        if outcome.second_edition and math.isfinite(lowest):
            lowest = r12(lowest)
        return threshold is not None and lowest < threshold
    if threshold is None or not _can_fail_early_on_values(outcome, rule):
        return False
    if outcome.method == "pass_rate":
        best_missing = float(stats.unexecuted)
    elif score_range is None:
        return False
    else:
        best_missing = stats.unexecuted * score_range[0 if outcome.lower_is_better else 1]
    if outcome.second_edition:
        # The sample the score will be the mean of: its sum is computed once, here.
        outcome.sample = stats.values
        total = outcome.moments().total if stats.values.size else 0.0
        best = r12((total + best_missing) / stats.expected)
    else:
        best = (float(stats.values.sum()) + best_missing) / stats.expected
    outcome.facts["best_possible"] = best
    return best > threshold if outcome.lower_is_better else best < threshold


def _not_enough_evidence(outcome: Outcome) -> str | None:
    stats = outcome.stats
    if stats.expected and (
        stats.executed / stats.expected < outcome.min_coverage
        or stats.executed < outcome.min_samples
    ):
        reason = stats.dominant_reason()
        return "inconclusive" if reason in (None, "pending", "measure_missing") else reason
    return None


def early_steps(outcome: Outcome, rule: str, score_range: tuple[float, float] | None) -> None:
    """Steps 1, 2 and 4 on the group's own data (step 3 needs the slices)."""
    if not outcome.stats.has_case:
        outcome.early = ("missing", "missing")
        return
    if _already_failed(outcome, rule, score_range):
        outcome.already_failed = True
        outcome.early = ("fail", "already_failed")
        return
    status = _not_enough_evidence(outcome)
    if status is not None:
        outcome.early = (status, "not_enough_evidence")


def decision(outcome: Outcome, rule: str, alpha: float) -> str:
    if outcome.comparative:
        if not outcome.evaluable:
            return "inconclusive"
        return "pass" if outcome.p_adjusted < alpha else "fail"
    threshold = outcome.threshold
    if outcome.method == "all_pass" or threshold is None:
        return "pass"
    assert outcome.score is not None
    if rule == "interval" and outcome.method in INTERVAL_RULE_METHODS and outcome.interval:
        outcome.facts["by_interval"] = True
        return _by_interval(outcome, outcome.interval, threshold)
    if outcome.lower_is_better:
        return "pass" if outcome.score <= threshold else "fail"
    return "pass" if outcome.score >= threshold else "fail"


def _by_interval(outcome: Outcome, interval: Interval, threshold: float) -> str:
    """The interval rule: pass when the whole interval is on the good side of the threshold,
    fail when it is wholly on the other; an end a quantile's sample is too small for decides
    nothing (too_few_samples_for_quantile when the decision needed it)."""
    lower, upper = interval.lower, interval.upper
    if outcome.lower_is_better:
        passes = upper is not None and upper <= threshold
        fails = lower is not None and lower > threshold
    else:
        passes = lower is not None and lower >= threshold
        fails = upper is not None and upper < threshold
    if passes:
        return "pass"
    if fails:
        return "fail"
    if "quantile_n" in outcome.facts:
        outcome.facts["too_few_samples"] = True
    return "inconclusive"


def decided_step(outcome: Outcome) -> str:
    """The step a decision is named by: a quantile interval missing the end it needed says
    so."""
    return "too_few_samples_for_quantile" if outcome.facts.get("too_few_samples") else "decision"
