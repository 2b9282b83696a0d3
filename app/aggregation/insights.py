"""Observations a careful reader asks for (docs/verdicts.md, sections 7 to 9): clusters and
the design effect, the minimum detectable effect and "underpowered", and what repeats show
(flaky examples, pass^k, pass@k)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from app.aggregation.clusters import clustered_se, design_effect, independent_se
from app.aggregation.groups import CheckGrid
from app.aggregation.inputs import DatasetIndex
from app.aggregation.power import POWER, mde, n_needed, n_needed_clusters, z
from app.aggregation.robust import t_quantile
from app.aggregation.rounding import r12
from app.domain.results import Observation

if TYPE_CHECKING:
    from app.aggregation.outcome import Outcome

INTERVAL_METHODS = ("pass_rate", "mean")
FLAKY_IDS_SHOWN = 20


def weigh_power(outcome: Outcome, rule: str, alpha: float) -> None:
    """The group's standard error and MDE; whether an inconclusive decision is underpowered."""
    sample = outcome.sample
    if outcome.interval is None or outcome.method not in INTERVAL_METHODS or sample is None:
        return
    found = (
        _rounded_power(outcome, rule, alpha)
        if outcome.second_edition
        else _first_edition_power(outcome, sample, alpha)
    )
    if found is None:
        return
    se, smallest, units = found
    if outcome.score is None or outcome.status != "inconclusive" or outcome.step != "decision":
        return
    _mark_underpowered(outcome, outcome.score, se, smallest, units)


def _mark_underpowered(
    outcome: Outcome, score: float, se: float, smallest: float, units: int
) -> None:
    """An inconclusive decision nearer its bar than the MDE is underpowered: how many units
    would decide it."""
    bar = outcome.facts.get("delta0") if outcome.comparative else outcome.threshold
    if bar is None:
        return
    distance = abs(score - bar)
    if outcome.second_edition:
        distance = r12(distance)
    if distance < smallest:
        level = outcome.facts.get("level")
        needed = (
            n_needed_clusters(units, se, distance, level)
            if outcome.second_edition and outcome.robust is not None and level is not None
            else n_needed(units, smallest, distance)
        )
        outcome.facts["underpowered"] = {
            "n": units,
            "n_needed": needed,
            "clustered": outcome.clusters is not None,
        }


def _first_edition_power(
    outcome: Outcome, sample: np.ndarray, alpha: float
) -> tuple[float, float, int] | None:
    """The first edition's standard error, MDE and units (recorded in the facts)."""
    if outcome.clusters is not None:
        first_se = clustered_se(sample, outcome.clusters)
        units = int(np.unique(outcome.clusters).size)
    else:
        first_se = independent_se(sample)
        units = int(sample.size)
    if first_se is None:
        return None
    smallest = mde(first_se, alpha)
    outcome.facts["power"] = {"alpha": alpha, "power": POWER, "se": first_se, "mde": smallest}
    return first_se, smallest, units


def critical_value(outcome: Outcome, rule: str, alpha: float) -> tuple[float, float]:
    """The quantile the group's decision uses, and its level: two-sided under `interval`,
    one-sided (at alpha / m in a family of m; from the third edition only a corrected one)
    otherwise; Student's t(G - 1) with clusters."""
    if rule == "interval" and not outcome.comparative:
        level = 1.0 - alpha / 2.0
    elif outcome.third_edition and not outcome.corrected:
        # Third edition: an uncorrected family tests each member at alpha itself.
        level = 1.0 - alpha
    else:
        level = 1.0 - alpha / outcome.family_size
    if outcome.robust is not None:
        return t_quantile(outcome.robust.df, level), level
    return z(level), level


def _rounded_power(outcome: Outcome, rule: str, alpha: float) -> tuple[float, float, int] | None:
    """Second edition: (se, mde, units), or None without variance (0/0 shows nothing)."""
    sample = outcome.moments()
    if sample.constant:
        return None
    if outcome.clusters is not None:
        if outcome.robust is None:
            return None
        se, units = outcome.robust.se, outcome.robust.clusters
    else:
        if sample.se is None:
            return None
        se, units = sample.se, sample.n
    se = r12(se)
    critical, outcome.facts["level"] = critical_value(outcome, rule, alpha)
    smallest = r12((critical + z(POWER)) * se)
    outcome.facts["power"] = {
        "alpha": alpha,
        "power": POWER,
        "se": se,
        "mde": smallest,
        "critical": r12(critical),
    }
    return se, smallest, units


def group_observations(outcome: Outcome) -> list[Observation]:
    """Clusters, design effect, MDE and underpowered for a check or slice (`slice` names it)."""
    where = outcome.slice_name
    found: list[Observation] = []
    if outcome.clusters is not None and outcome.sample is not None and outcome.sample.size:
        count = int(np.unique(outcome.clusters).size)
        found.append(Observation("clusters", count=count, slice=where))
        effect = _design_effect(outcome)
        if effect is not None:
            found.append(Observation("design_effect", detail=effect, slice=where))
        if outcome.early is not None and outcome.early[1] == "too_few_clusters":
            detail = {"clusters": count, "min_clusters": outcome.min_clusters}
            found.append(Observation("too_few_clusters", detail=detail, slice=where))
    if "power" in outcome.facts:
        found.append(Observation("mde", detail=outcome.facts["power"], slice=where))
    underpowered = outcome.facts.get("underpowered")
    if underpowered is not None:
        detail = {"n": underpowered["n"], "n_needed": underpowered["n_needed"]}
        found.append(Observation("underpowered", detail=detail, slice=where))
    return found


def _design_effect(outcome: Outcome) -> float | None:
    """SE^2(CR1) / SE^2(independent); the second edition shows none without variance."""
    assert outcome.sample is not None and outcome.clusters is not None
    if not outcome.second_edition:
        return design_effect(outcome.sample, outcome.clusters)
    if outcome.moments().constant or outcome.robust is None:
        return None
    ratio = outcome.robust.design_effect
    if ratio is None:
        return None
    if outcome.third_edition and r12(1.0 + ratio) == 1.0:
        # The clustered variance is 0 but for rounding noise (6.61e-32): no ratio to show.
        return None
    return r12(ratio)


def repeat_observations(grid: CheckGrid, dataset: DatasetIndex, method: str) -> list[Observation]:
    """Flaky examples (a pass and a fail among their scored repeats), pass^k and pass@k."""
    if grid.repeats < 2:
        return []
    flaky = np.flatnonzero((grid.pass_count > 0) & (grid.failed_scored > 0))
    shown = [dataset.ids[i] for i in flaky[:FLAKY_IDS_SHOWN]]
    found = [Observation("flaky_examples", count=int(flaky.size), detail=shown)]
    executed = grid.executed
    if executed.any():
        passes = grid.pass_count[executed]
        found.append(Observation("pass_all_repeats", detail=float(np.mean(passes == grid.repeats))))
        found.append(Observation("pass_any_repeat", detail=float(np.mean(passes > 0))))
    return found
