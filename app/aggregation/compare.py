"""Paired comparisons against a baseline (docs/verdicts.md, sections 6 and 7): pairing, the
paired (or clustered) t-test, and the comparison's report-body form."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from app.aggregation.clusters import clustered_p_value
from app.aggregation.groups import GroupStats
from app.aggregation.stats import bootstrap_seed, paired_p_value

if TYPE_CHECKING:
    from app.aggregation.engine import Outcome


def compare(
    outcome: Outcome, baseline: GroupStats | None, alpha: float, delta0: float, evaluation_id: str
) -> None:
    """Pair the candidate's executed examples with the baseline's; score, resample and p."""
    outcome.comparative = True
    outcome.facts["delta0"] = delta0
    candidate = outcome.stats
    paired_index = np.empty(0, dtype=np.int64)
    if baseline is None:
        pairs = np.empty(0, dtype=np.float64)
        outcome.unpaired = candidate.executed
    else:
        paired_index, in_candidate, in_baseline = np.intersect1d(
            candidate.executed_index, baseline.executed_index, return_indices=True
        )
        pairs = candidate.values[in_candidate] - baseline.values[in_baseline]
        outcome.unpaired = candidate.executed + baseline.executed - 2 * pairs.size
    outcome.pairs = int(pairs.size)
    outcome.score = float(pairs.mean()) if pairs.size else None
    outcome.sample = pairs
    if outcome.cluster_of is not None:
        outcome.clusters = outcome.cluster_of[paired_index]
    if pairs.size:
        seed = bootstrap_seed(evaluation_id, outcome.check_id, outcome.slice_name)
        outcome.resample = (pairs, seed, outcome.clusters)
    outcome.evaluable = outcome.early is None and pairs.size >= max(2, outcome.min_samples)
    if not outcome.evaluable:
        outcome.p_value = 1.0
    elif outcome.clusters is not None:
        outcome.p_value = clustered_p_value(pairs, outcome.clusters, delta0)
    else:
        outcome.p_value = paired_p_value(pairs, delta0)


def comparison_body(
    outcome: Outcome, baseline_id: str | None, delta0: float
) -> dict[str, Any] | None:
    if not outcome.comparative:
        return None
    body: dict[str, Any] = {
        "baseline_evaluation_id": baseline_id,
        "delta0": delta0,
        "pairs": outcome.pairs,
        "p_value": outcome.p_value,
        "p_adjusted": outcome.p_adjusted,
        "family_size": outcome.family_size,
        "method": "paired_t",
    }
    if outcome.clusters is not None:
        body["method"] = "paired_t_clustered"
        body["clusters"] = int(np.unique(outcome.clusters).size)
    return body
