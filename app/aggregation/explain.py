"""The explanation sentence of a check: what decided its status, with the numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.aggregation.outcome import Outcome


def _n(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}"


def _executed(outcome: Outcome) -> str:
    stats = outcome.stats
    return f"{stats.executed} of {stats.expected} examples executed"


def _compared(outcome: Outcome, alpha: float) -> str:
    """What decided a comparison: too few pairs, or the (adjusted) p-value against alpha."""
    if not outcome.evaluable:
        return (
            f"only {outcome.pairs} paired examples (at least {max(2, outcome.min_samples)} "
            "needed): the comparison cannot tell"
        )
    relation = "<" if outcome.p_adjusted < alpha else ">="
    what = "mean paired difference"
    if outcome.facts.get("relative"):
        ratio = "baseline / candidate" if outcome.lower_is_better else "candidate / baseline"
        what = f"log ratio of the means ({ratio})"
    elif outcome.lower_is_better:
        what = "mean paired difference (baseline - candidate: lower is better)"
    return (
        f"{what} {_n(outcome.score)} over {outcome.pairs} pairs; "
        f"p = {_n(outcome.p_value)}, adjusted {_n(outcome.p_adjusted)} {relation} alpha {alpha}"
    )


def _against_threshold(outcome: Outcome) -> str:
    """What decided a check against its threshold: its interval, or its score."""
    threshold = outcome.threshold
    interval = outcome.interval
    decided = outcome.facts.get("decision")
    lower = outcome.lower_is_better
    better = " (lower is better)" if lower else ""
    if outcome.facts.get("by_interval") and interval is not None:
        bounds = f"interval [{_n(interval.lower)}, {_n(interval.upper)}]"
        if decided == "inconclusive":
            return f"{bounds} straddles threshold {_n(threshold)}: the evidence cannot tell"
        side = "lies above" if (decided == "pass") != lower else "lies below"
        return f"{bounds} {side} threshold {_n(threshold)}{better} ({_executed(outcome)})"
    score = outcome.score
    passed = (
        score is not None
        and threshold is not None
        and (score <= threshold if lower else score >= threshold)
    )
    relation = ("<=" if passed else ">") if lower else (">=" if passed else "<")
    return f"score {_n(score)} {relation} threshold {_n(threshold)}{better} ({_executed(outcome)})"


def _decision(outcome: Outcome, alpha: float) -> str:
    if outcome.comparative:
        return _compared(outcome, alpha)
    if outcome.method == "all_pass":
        return f"every scored repeat passed ({_executed(outcome)})"
    return _against_threshold(outcome)


def explain(outcome: Outcome, slices: list[Outcome], alpha: float) -> str:
    """One sentence saying which step decided the check's status, and why."""
    stats = outcome.stats
    step = outcome.step
    if step == "missing":
        return "No case was recorded for this check: nothing ran for it."
    if step == "already_failed":
        return _already_failed(outcome)
    if step == "required_slice_failed":
        return f"Failed: the required slice {outcome.facts['slice']} failed."
    if step == "not_enough_evidence":
        reason = stats.dominant_reason() or "none"
        return (
            f"Not enough evidence: {_executed(outcome)} (min_coverage {outcome.min_coverage}, "
            f"min_samples {outcome.min_samples}); most unexecuted examples: {reason}."
        )
    if step == "ratio_undefined":
        return (
            "Inconclusive: ratio_undefined: the relative margin compares the log ratio of the "
            "means, and a mean over the paired examples is not above 0."
        )
    if step == "too_few_samples_for_quantile":
        found = outcome.facts["quantile_n"]
        return (
            f"Inconclusive: too_few_samples_for_quantile: {_decision(outcome, alpha)}; the "
            f"order-statistic interval of the {outcome.q} quantile has both ends from "
            f"{found['n_min']} examples, and {found['n']} executed."
        )
    if step == "too_few_labels":
        found = outcome.facts["labels"]
        return (
            f"Inconclusive: too_few_labels: {found['n']} counting "
            f"{'label' if found['n'] == 1 else 'labels'} in the judge's label sample, and the "
            f"corrected verdict needs at least {found['min']} (min_labels); the examples still "
            "to label are listed under labels/requested."
        )
    if step == "too_few_clusters":
        count = outcome.facts.get("clusters", 0)
        return (
            f"Inconclusive: too few clusters: the examples fall in {count} "
            f"{'cluster' if count == 1 else 'clusters'}, and a cluster-robust verdict needs "
            f"at least {outcome.min_clusters} (min_clusters); more clusters, not more examples "
            "per cluster, would settle it."
        )
    sentence = _decision(outcome, alpha)
    if step == "required_slice_not_passed":
        lagging = next(s for s in slices if s.name == outcome.facts["slice"])
        return (
            f"{sentence[0].upper()}{sentence[1:]}, but the required slice "
            f"{lagging.slice_name} is {lagging.status}."
        )
    prefix = outcome.status.capitalize()
    sentence += _underpowered(outcome)
    return f"{prefix}: {sentence}."


def _already_failed(outcome: Outcome) -> str:
    """Why a check failed whatever its unexecuted examples would do."""
    stats = outcome.stats
    if outcome.method == "all_pass":
        why = "a scored repeat failed"
    elif outcome.method == "min":
        why = (
            f"a scored repeat scored {_n(stats.min_scored_score)} "
            f"< threshold {_n(outcome.threshold)}"
        )
    elif stats.unexecuted == 0:
        why = f"score {_n(outcome.facts.get('best_possible'))} < threshold {_n(outcome.threshold)}"
    else:
        why = (
            f"even with every unexecuted example at its best the score could reach only "
            f"{_n(outcome.facts.get('best_possible'))} < threshold {_n(outcome.threshold)}"
        )
    if stats.unexecuted == 0:
        return f"Failed: {why}."
    examples = "example" if stats.unexecuted == 1 else "examples"
    return f"Already failed: {why}, whatever the {stats.unexecuted} unexecuted {examples} would do."


def _underpowered(outcome: Outcome) -> str:
    """The clause an underpowered check adds: how many more units would settle it."""
    underpowered = outcome.facts.get("underpowered")
    if underpowered is None:
        return ""
    units = "clusters" if underpowered["clustered"] else "examples"
    needed = underpowered["n_needed"]
    more = (
        "no number of them would settle it"
        if needed is None
        else f"about {needed} {units} would settle it at the observed variance "
        f"(now {underpowered['n']})"
    )
    return (
        f"; underpowered: the distance to the bar is below the minimum detectable effect "
        f"{_n(outcome.facts['power']['mde'])}, {more}"
    )
