"""Observations a careful reader asks for (docs/verdicts.md, sections 7 to 9): clusters and
the design effect, the minimum detectable effect and "underpowered", and what repeats show
(flaky examples, pass^k, pass@k)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from app.aggregation.clusters import clustered_se, design_effect, independent_se
from app.aggregation.groups import CheckGrid
from app.aggregation.inputs import DatasetIndex
from app.aggregation.power import POWER, mde, n_needed

if TYPE_CHECKING:
    from app.aggregation.engine import Outcome

INTERVAL_METHODS = ("pass_rate", "mean")
FLAKY_IDS_SHOWN = 20


def weigh_power(outcome: Outcome, alpha: float) -> None:
    """The group's standard error and MDE; whether an inconclusive decision is underpowered."""
    sample = outcome.sample
    if outcome.interval is None or outcome.method not in INTERVAL_METHODS or sample is None:
        return
    if outcome.clusters is not None:
        se = clustered_se(sample, outcome.clusters)
        units = int(np.unique(outcome.clusters).size)
    else:
        se = independent_se(sample)
        units = int(sample.size)
    if se is None or outcome.score is None:
        return
    smallest = mde(se, alpha)
    outcome.facts["power"] = {"alpha": alpha, "power": POWER, "se": se, "mde": smallest}
    if outcome.status != "inconclusive" or outcome.step != "decision":
        return
    bar = outcome.facts.get("delta0") if outcome.comparative else outcome.threshold
    if bar is None:
        return
    distance = abs(outcome.score - bar)
    if distance < smallest:
        outcome.facts["underpowered"] = {
            "n": units,
            "n_needed": n_needed(units, smallest, distance),
            "clustered": outcome.clusters is not None,
        }


def group_observations(outcome: Outcome) -> list[dict[str, Any]]:
    """Clusters, design effect, MDE and underpowered for a check or slice (`slice` names it)."""
    where: dict[str, Any] = {} if outcome.slice_name is None else {"slice": outcome.slice_name}
    found: list[dict[str, Any]] = []
    if outcome.clusters is not None and outcome.sample is not None and outcome.sample.size:
        found.append({"code": "clusters", "count": int(np.unique(outcome.clusters).size), **where})
        effect = design_effect(outcome.sample, outcome.clusters)
        if effect is not None:
            found.append({"code": "design_effect", "detail": effect, **where})
    if "power" in outcome.facts:
        found.append({"code": "mde", "detail": outcome.facts["power"], **where})
    underpowered = outcome.facts.get("underpowered")
    if underpowered is not None:
        detail = {"n": underpowered["n"], "n_needed": underpowered["n_needed"]}
        found.append({"code": "underpowered", "detail": detail, **where})
    return found


def repeat_observations(
    grid: CheckGrid, dataset: DatasetIndex, method: str
) -> list[dict[str, Any]]:
    """Flaky examples (a pass and a fail among their scored repeats), pass^k and pass@k."""
    if grid.repeats < 2:
        return []
    flaky = np.flatnonzero((grid.pass_count > 0) & (grid.failed_scored > 0))
    found: list[dict[str, Any]] = [
        {
            "code": "flaky_examples",
            "count": int(flaky.size),
            "detail": [dataset.ids[i] for i in flaky[:FLAKY_IDS_SHOWN]],
        }
    ]
    executed = grid.executed
    if executed.any():
        passes = grid.pass_count[executed]
        found.append({"code": "pass_all_repeats", "detail": float(np.mean(passes == grid.repeats))})
        found.append({"code": "pass_any_repeat", "detail": float(np.mean(passes > 0))})
    return found
