"""What changed between two reports' cases (docs/changes.md): each example's outcome before and
after, the counts of every transition, McNemar's exact test on the examples executed in both,
and the paired difference with its seeded bootstrap interval. Pure array arithmetic."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from app.aggregation.rounding import r12
from app.aggregation.stats import bootstrap, bootstrap_seed
from app.domain.vocabulary import FAIL, PASS, PASS_FAIL_METHODS

OUTCOMES = ("pass", "fail", "error", "missing")
PASSED, FAILED, ERRORED, MISSING = range(4)
TRANSITIONS = tuple(f"{before}-{after}" for before in OUTCOMES for after in OUTCOMES)
MCNEMAR_METHOD = "mcnemar_exact"
DIFFERENCE_METHOD = "paired_bootstrap"
TOP = 20

IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class ExampleFacts:
    """One report's check over its dataset's examples: each example's outcome code and value
    (the pass fraction of a pass/fail check, the mean or min score of a scored one; NaN unless
    it passed or failed)."""

    outcome: NDArray[np.int8]
    value: NDArray[np.float64]


def example_facts(
    position: NDArray[np.int32],
    repeat: NDArray[np.int32],
    status: NDArray[np.int8],
    score: NDArray[np.float64],
    examples: int,
    repeats: int,
    method: str,
) -> ExampleFacts:
    """Each example's outcome: pass when every repeat was scored and passed, fail when every
    repeat was scored and one did not pass, error when it has cases but was not executed,
    missing when it has none."""
    cells = position.astype(np.int64) * repeats + repeat
    flat = np.full(examples * repeats, -1, dtype=np.int8)
    flat[cells] = status
    grid = flat.reshape(examples, repeats)
    scored = (grid == PASS) | (grid == FAIL)
    executed = scored.all(axis=1)
    passed = (grid == PASS).all(axis=1)
    has_case = (grid >= 0).any(axis=1)
    outcome = np.full(examples, MISSING, dtype=np.int8)
    outcome[has_case] = ERRORED
    outcome[executed] = FAILED
    outcome[executed & passed] = PASSED
    if method in PASS_FAIL_METHODS:
        value = (grid == PASS).mean(axis=1)
    else:
        scores = np.full(examples * repeats, np.nan)
        scores[cells] = np.where((status == PASS) | (status == FAIL), score, np.nan)
        table = scores.reshape(examples, repeats)
        with np.errstate(invalid="ignore"):
            value = table.mean(axis=1) if method == "mean" else table.min(axis=1)
    return ExampleFacts(outcome, np.where(executed, value, np.nan))


def on_union(facts: ExampleFacts, index: IntArray) -> ExampleFacts:
    """Facts laid over a union of example ids: `index` gives each union example's position in
    this report's dataset, or -1 where the dataset lacks it (missing)."""
    present = index >= 0
    outcome = np.full(index.size, MISSING, dtype=np.int8)
    value = np.full(index.size, np.nan)
    outcome[present] = facts.outcome[index[present]]
    value[present] = facts.value[index[present]]
    return ExampleFacts(outcome, value)


def transition_codes(before: ExampleFacts, after: ExampleFacts) -> NDArray[np.int8]:
    """Each example's transition as an index into TRANSITIONS."""
    return (before.outcome * len(OUTCOMES) + after.outcome).astype(np.int8)


def transition_counts(codes: NDArray[np.int8]) -> dict[str, int]:
    """How many examples made each (before -> after) transition, every pair named."""
    counts = np.bincount(codes.astype(np.int64), minlength=len(TRANSITIONS))
    return {name: int(count) for name, count in zip(TRANSITIONS, counts, strict=True)}


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p: min(1, 2 * BinomCDF(min(b, c); b + c, 0.5)); 1 when no
    example changed."""
    if b + c == 0:
        return 1.0
    return min(1.0, 2.0 * float(stats.binom.cdf(min(b, c), b + c, 0.5)))


@dataclass(frozen=True)
class Difference:
    """The paired difference (after - before) over the examples executed in both."""

    pairs: int
    estimate: float | None
    interval: dict[str, object] | None
    # Union positions of the paired examples and their differences.
    paired: IntArray
    changes: NDArray[np.float64]


def paired_difference(
    before: ExampleFacts, after: ExampleFacts, mask: NDArray[np.bool_], alpha: float, seed: int
) -> Difference:
    """The mean paired difference with its seeded percentile bootstrap (2,000 resamples)."""
    both = mask & (before.outcome <= FAILED) & (after.outcome <= FAILED)
    paired = np.flatnonzero(both)
    changes = after.value[paired] - before.value[paired]
    if not paired.size:
        return Difference(0, None, None, paired, changes)
    estimate = r12(float(np.mean(changes)))
    interval = bootstrap(changes, alpha, seed)
    body = interval.as_body()
    body["method"] = f"{DIFFERENCE_METHOD}/{interval.method}"
    lower, upper = interval.ends
    body["lower"] = min(r12(lower), estimate)
    body["upper"] = max(r12(upper), estimate)
    return Difference(int(paired.size), estimate, body, paired, changes)


def diff_seed(report_id: str, other_id: str, check_id: str, slice_name: str | None = None) -> int:
    """The bootstrap seed of a diff: sha256("<id>/<other_id>/<check_id>[/<slice>]")."""
    return bootstrap_seed(f"{report_id}/{other_id}", check_id, slice_name)


def largest_moves(difference: Difference, gains: bool, top: int = TOP) -> list[tuple[int, float]]:
    """The `top` largest drops (or gains) as (union position, change), largest first; ties in
    example order."""
    changes = difference.changes
    chosen = np.flatnonzero(changes > 0 if gains else changes < 0)
    if not chosen.size:
        return []
    key = -changes[chosen] if gains else changes[chosen]
    order = np.lexsort((difference.paired[chosen], key))[:top]
    return [(int(difference.paired[chosen[i]]), float(changes[chosen[i]])) for i in order]


@dataclass(frozen=True)
class GroupDiff:
    """A check's (or slice's) diff over the examples in its mask."""

    transitions: dict[str, int]
    mcnemar: dict[str, object]
    difference: Difference


def group_diff(
    before: ExampleFacts,
    after: ExampleFacts,
    codes: NDArray[np.int8],
    mask: NDArray[np.bool_],
    alpha: float,
    seed: int,
) -> GroupDiff:
    """Transitions, McNemar's exact test and the paired difference over `mask`."""
    counts = transition_counts(codes[mask])
    b, c = counts["pass-fail"], counts["fail-pass"]
    test = {
        "method": MCNEMAR_METHOD,
        "pairs": counts["pass-pass"] + b + c + counts["fail-fail"],
        "b": b,
        "c": c,
        "p_value": r12(mcnemar_exact(b, c)),
    }
    return GroupDiff(counts, test, paired_difference(before, after, mask, alpha, seed))


def union_of(
    before_ids: NDArray[np.str_], after_ids: NDArray[np.str_]
) -> tuple[NDArray[np.str_], IntArray, IntArray]:
    """The union of two sorted id arrays (code point order, which is UTF-8 byte order), and
    each union id's position in either array (-1 when absent)."""
    union = np.union1d(before_ids, after_ids)
    return union, _positions_in(before_ids, union), _positions_in(after_ids, union)


def _positions_in(ids: NDArray[np.str_], union: NDArray[np.str_]) -> IntArray:
    found = np.full(union.size, -1, dtype=np.int64)
    if not ids.size:
        return found
    at = np.searchsorted(ids, union)
    inside = at < ids.size
    hit = np.zeros(union.size, dtype=np.bool_)
    hit[inside] = ids[at[inside]] == union[inside]
    found[hit] = at[hit]
    return found


def example_means(
    position: NDArray[np.int32], values: NDArray[np.float64], examples: int
) -> NDArray[np.float64]:
    """Each example's mean over the cases that carry a value (NaN where none does)."""
    present = ~np.isnan(values)
    sums = np.bincount(position[present], weights=values[present], minlength=examples)
    counts = np.bincount(position[present], minlength=examples)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def largest_measure_changes(
    before: NDArray[np.float64],
    after: NDArray[np.float64],
    before_at: IntArray,
    after_at: IntArray,
    top: int = TOP,
) -> list[tuple[int, float, float]]:
    """The `top` union positions whose measure changed most in absolute value, as (position,
    before, after), largest first (ties in example order); an example needs a value in both."""
    both = (before_at >= 0) & (after_at >= 0)
    index = np.flatnonzero(both)
    was = np.where(both, before[np.maximum(before_at, 0)], np.nan)[index]
    now = np.where(both, after[np.maximum(after_at, 0)], np.nan)[index]
    valued = ~(np.isnan(was) | np.isnan(now))
    index, was, now = index[valued], was[valued], now[valued]
    order = np.lexsort((index, -np.abs(now - was)))[:top]
    return [(int(index[i]), float(was[i]), float(now[i])) for i in order]
