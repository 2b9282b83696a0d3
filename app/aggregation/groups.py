"""Per-example facts of one check, and the statistics of a group of its examples.

A check's cases are laid on an (examples x repeats) grid once; the check and each of its
slices are then masks over the examples. Everything is array arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from app.aggregation.inputs import (
    FAIL,
    PASS,
    REASON_RANK,
    REASONS,
    SCORED_RANK,
    CaseColumns,
    InvalidInput,
)
from app.domain.results import Coverage
from app.domain.vocabulary import PASS_FAIL_METHODS

PENDING_RANK = REASON_RANK["pending"]


@dataclass(frozen=True)
class GroupStats:
    """One check or slice over its expected examples."""

    expected: int
    executed: int
    has_case: bool
    reason_counts: NDArray[np.int64]
    executed_index: NDArray[np.int64]
    values: NDArray[np.float64]
    passes: int
    any_scored_fail: bool
    min_scored_score: float
    stale_cases: int
    scored_cases: int
    undigested: int
    assurance: int | None

    @property
    def unexecuted(self) -> int:
        """Expected examples that were not executed."""
        return self.expected - self.executed

    @property
    def coverage(self) -> Coverage:
        """Examples expected, executed and missing."""
        return Coverage(self.expected, self.executed, self.unexecuted)

    def dominant_reason(self) -> str | None:
        """The reason held by the most unexecuted examples (ties: earlier in the order)."""
        if self.unexecuted == 0:
            return None
        return REASONS[int(np.argmax(self.reason_counts))]


def _shares_a_cell(cells: NDArray[np.int64], size: int) -> bool:
    """Whether two cases fall on one grid cell: in linear time, as stored cases arrive in
    case order (strictly increasing cells) and anything else is counted, never sorted."""
    if cells.size < 2 or bool((np.diff(cells) > 0).all()):
        return False
    return bool(np.bincount(cells, minlength=size).max() > 1)


class CheckGrid:
    """A check's cases on its (examples x repeats) grid."""

    def __init__(self, cases: CaseColumns, examples: int, repeats: int) -> None:
        cells = cases.example_index.astype(np.int64) * repeats + cases.repeat
        if cases.size and (
            cases.example_index.min() < 0
            or cases.example_index.max() >= examples
            or cases.repeat.min() < 0
            or cases.repeat.max() >= repeats
        ):
            raise InvalidInput("a case lies outside the check's examples or repeats")
        if _shares_a_cell(cells, examples * repeats):
            raise InvalidInput("two cases share a (check, example, repeat)")
        self.cases = cases
        self.examples = examples
        self.repeats = repeats
        size = examples * repeats
        rank = cases.reason_rank()
        scored = rank == SCORED_RANK
        rank_grid = np.full(size, PENDING_RANK, dtype=np.int8)
        rank_grid[cells] = rank
        pass_grid = np.zeros(size, dtype=np.bool_)
        pass_grid[cells] = scored & (cases.status == PASS)
        score_grid = np.full(size, np.nan)
        score_grid[cells] = np.where(scored, cases.score, np.nan)
        self.example_rank = rank_grid.reshape(examples, repeats).min(axis=1)
        self.executed = self.example_rank == SCORED_RANK
        self.pass_fraction: NDArray[np.float64] = pass_grid.reshape(examples, repeats).mean(axis=1)
        self.pass_count = pass_grid.reshape(examples, repeats).sum(axis=1)
        scores = score_grid.reshape(examples, repeats)
        self.score_mean = np.where(self.executed, scores.mean(axis=1), np.nan)
        self.score_min = np.where(self.executed, scores.min(axis=1), np.nan)
        # The lowest score among each example's scored repeats (inf when none).
        self.scored_min = np.where(np.isnan(scores), np.inf, scores).min(axis=1)
        # Per example: facts about its cases, summed per group with a mask.
        example = cases.example_index
        self.case_count = np.bincount(example, minlength=examples)
        self.failed_scored = np.bincount(
            example[scored & (cases.status == FAIL)], minlength=examples
        )
        self.stale_count = np.bincount(example[cases.stale], minlength=examples)
        self.scored_count = np.bincount(example[scored], minlength=examples)
        self.undigested_count = np.bincount(
            example[scored & ~cases.has_output_digest], minlength=examples
        )
        self.assurance = np.full(examples, np.iinfo(np.int8).max, dtype=np.int8)
        np.minimum.at(self.assurance, example, cases.assurance)

    def values(self, method: str) -> NDArray[np.float64]:
        """Each example's value (meaningful where executed)."""
        if method in PASS_FAIL_METHODS:
            return self.pass_fraction
        if method in ("mean", "quantile"):
            return self.score_mean
        return self.score_min

    def group(self, method: str, mask: NDArray[np.bool_] | None = None) -> GroupStats:
        """Statistics over the examples in `mask` (all examples when None)."""
        selected = np.ones(self.examples, dtype=np.bool_) if mask is None else mask
        executed = selected & self.executed
        executed_index = np.flatnonzero(executed)
        unexecuted_rank = self.example_rank[selected & ~self.executed]
        assurance = self.assurance[selected]
        has_case = bool(self.case_count[selected].any())
        min_scored = self.scored_min[selected]
        return GroupStats(
            expected=int(selected.sum()),
            executed=int(executed_index.size),
            has_case=has_case,
            reason_counts=np.bincount(unexecuted_rank, minlength=len(REASONS))[: len(REASONS)],
            executed_index=executed_index,
            values=self.values(method)[executed_index],
            passes=int(self.pass_count[executed_index].sum()),
            any_scored_fail=bool(self.failed_scored[selected].any()),
            min_scored_score=float(min_scored.min()) if min_scored.size else float("inf"),
            stale_cases=int(self.stale_count[selected].sum()),
            scored_cases=int(self.scored_count[selected].sum()),
            undigested=int(self.undigested_count[selected].sum()),
            assurance=int(assurance.min()) if has_case else None,
        )
