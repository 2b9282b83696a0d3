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


def _decision(outcome: Outcome, alpha: float) -> str:
    if outcome.comparative:
        if not outcome.evaluable:
            return (
                f"only {outcome.pairs} paired examples (at least {max(2, outcome.min_samples)} "
                "needed): the comparison cannot tell"
            )
        relation = "<" if outcome.p_adjusted < alpha else ">="
        return (
            f"mean paired difference {_n(outcome.score)} over {outcome.pairs} pairs; "
            f"p = {_n(outcome.p_value)}, adjusted {_n(outcome.p_adjusted)} {relation} alpha {alpha}"
        )
    if outcome.method == "all_pass":
        return f"every scored repeat passed ({_executed(outcome)})"
    threshold = outcome.threshold
    interval = outcome.interval
    decided = outcome.facts.get("decision")
    if outcome.facts.get("by_interval") and interval is not None:
        bounds = f"interval [{_n(interval.lower)}, {_n(interval.upper)}]"
        if decided == "inconclusive":
            return f"{bounds} straddles threshold {_n(threshold)}: the evidence cannot tell"
        side = "lies above" if decided == "pass" else "lies below"
        return f"{bounds} {side} threshold {_n(threshold)} ({_executed(outcome)})"
    passed = outcome.score is not None and threshold is not None and outcome.score >= threshold
    relation = ">=" if passed else "<"
    return f"score {_n(outcome.score)} {relation} threshold {_n(threshold)} ({_executed(outcome)})"


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
