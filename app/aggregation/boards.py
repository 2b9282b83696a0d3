"""A board: many subjects' current reports on one check, ranked with rank intervals that say
which differences are real (docs/boards.md).

Every pair of subjects is compared on the examples executed in both (paired by example id):
McNemar's exact test for a pass rate with one repeat, the paired t-test otherwise (an
example's value is the mean over its repeats), both two-sided; Holm's correction over all
K(K - 1)/2 pairs decides at `alpha` (adjusted p strictly below it). A subject's rank interval
is [1 + how many are significantly better, K - how many it is significantly better than].

Vectorised over the K x N matrix of examples: the pass/fail counts are exact integers, the
paired sums numpy's; every p-value is rounded to 12 significant digits before it decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from app.aggregation.rounding import r12

PairedTest = Literal["mcnemar_exact", "paired_t"]
NO_EXECUTED_EXAMPLE = "no_executed_example"


@dataclass(frozen=True)
class Entrant:
    """One subject's report on the board's check: its executed examples (ids, or positions) and
    their values (1.0 or 0.0 for a pass rate with one repeat; the mean over repeats
    otherwise), and the report's score."""

    subject: str
    report_id: str
    score: float | None
    # Example ids, or any other names that pair them (the service gives dataset positions).
    examples: Sequence[str] | NDArray[np.int32]
    values: NDArray[np.float64]
    # What the board's body repeats of the report: its digest and the check's interval.
    report_digest: str = ""
    interval: dict[str, object] | None = None

    @classmethod
    def of(
        cls, subject: str, report_id: str, score: float | None, values: dict[str, float]
    ) -> Entrant:
        """An entrant from example id -> value."""
        ids = sorted(values)
        return cls(subject, report_id, score, ids, np.array([values[e] for e in ids], dtype=float))

    def value_of(self) -> dict[str, float]:
        """Example id -> value."""
        return dict(zip(self.examples, self.values.tolist(), strict=True))


@dataclass(frozen=True)
class Placed:
    """A ranked subject."""

    entrant: Entrant
    rank: int
    rank_interval: tuple[int, int]


@dataclass(frozen=True)
class PairResult:
    """One pair (`first` placed above or level with `second`): its counts, raw and Holm
    adjusted p, and which of the two is significantly better (None: neither)."""

    first: str
    second: str
    n: int
    # McNemar: examples `first` passed and `second` failed (b), and the reverse (c).
    b: int | None
    c: int | None
    # The paired t-test: mean of (second - first) over the shared examples.
    mean_difference: float | None
    p_value: float
    p_adjusted: float
    better: str | None


@dataclass(frozen=True)
class Board:
    """The ranking, the pairs, the subjects that cannot be ranked, and the top group."""

    placed: list[Placed]
    pairs: list[PairResult]
    excluded: list[tuple[Entrant, str]]
    top_group: list[str]
    test: PairedTest
    alpha: float


def _matrices(
    entrants: Sequence[Entrant],
) -> tuple[NDArray[np.float64] | None, NDArray[np.float64]]:
    """(executed, values): K x N over every example any entrant executed, in id order; values
    0 where not executed. Entrants of one dataset that all executed the same examples (the
    usual board) skip the union, and `executed` is None: every entrant executed every column."""
    first = np.asarray(entrants[0].examples) if entrants else np.array([], dtype=str)
    if all(
        e.examples is entrants[0].examples or np.array_equal(first, np.asarray(e.examples))
        for e in entrants[1:]
    ):
        values = np.vstack([e.values for e in entrants]) if entrants else np.zeros((0, 0))
        return None, values
    union = np.unique(np.concatenate([np.asarray(e.examples) for e in entrants]))
    executed = np.zeros((len(entrants), len(union)))
    values = np.zeros((len(entrants), len(union)))
    for row, entrant in enumerate(entrants):
        columns = np.searchsorted(union, np.asarray(entrant.examples))
        executed[row, columns] = 1.0
        values[row, columns] = entrant.values
    return executed, values


def mcnemar_pairs(
    executed: NDArray[np.float64] | None, passed: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """(n shared, b, p): b[i, j] counts examples i passed and j failed; p is McNemar's exact
    two-sided p (statsmodels' `mcnemar(exact=True)`: twice the binomial tail, at most 1).
    The counts are products of 0/1 matrices in float32, exact up to 2^24 examples."""
    k, n = passed.shape
    if n >= 1 << 24:
        raise ValueError("a board compares at most 16,777,215 examples")
    if executed is None:
        shared = np.full((k, k), n, dtype=np.int64)
        won_at = passed.astype(np.float32)
        lost_at = np.float32(1.0) - won_at
    else:
        mask = executed.astype(np.float32)
        shared = np.rint(mask @ mask.T).astype(np.int64)
        won_at = mask * passed.astype(np.float32)
        lost_at = mask - won_at
    won = np.rint(won_at @ lost_at.T).astype(np.int64)
    lost = won.T
    p = np.minimum(1.0, 2.0 * stats.binom.cdf(np.minimum(won, lost), won + lost, 0.5))
    p[shared < 2] = 1.0
    return shared, won, p


def _paired_sums(
    executed: NDArray[np.float64] | None, values: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(n shared, sum of x_i, sum of x_i^2 over the examples i and j share, at [i, j], and the
    cross products)."""
    if executed is None:
        k, n = values.shape
        shared = np.full((k, k), float(n))
        own = np.repeat(values.sum(axis=1)[:, None], k, axis=1)
        squares = np.repeat((values * values).sum(axis=1)[:, None], k, axis=1)
        return shared, own, squares, values @ values.T
    weighted = executed * values
    shared = np.rint(executed @ executed.T)
    own = weighted @ executed.T
    squares = (weighted * values) @ executed.T
    return shared, own, squares, weighted @ weighted.T


def paired_t_pairs(
    executed: NDArray[np.float64] | None, values: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """(n shared, mean of d, p): d = x_j - x_i over the examples both executed; p is the
    two-sided paired t-test's (scipy's `ttest_rel`); no variance: p = 1 when the mean is 0
    (scipy: nan), 0 otherwise (scipy: t infinite)."""
    shared, own, squares, cross = _paired_sums(executed, values)
    theirs = own.T
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = (theirs - own) / shared
        variance = (squares.T - 2.0 * cross + squares - shared * mean * mean) / (shared - 1.0)
        variance = np.maximum(variance, 0.0)
        t = mean / np.sqrt(variance / shared)
        p = 2.0 * stats.t.sf(np.abs(t), shared - 1.0)
    flat = variance <= 1e-24 * np.maximum(1.0, mean * mean)
    p = np.where(flat, np.where(np.abs(mean) <= 1e-12, 1.0, 0.0), p)
    p[shared < 2] = 1.0
    return shared.astype(np.int64), np.nan_to_num(mean), p


def holm(p_values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Holm's step-down adjusted p-values (statsmodels' `multipletests(method="holm")`)."""
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p_values[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


def _order(entrants: Sequence[Entrant]) -> list[Entrant]:
    """By score, highest first; ties by subject digest."""
    return sorted(entrants, key=lambda e: (-(e.score or 0.0), e.subject))


def _direction(
    i: int, j: int, won: NDArray[np.int64] | None, mean: NDArray[np.float64] | None
) -> tuple[int | None, int | None, float | None, bool]:
    """(b, c, mean difference, whether j is ahead of i) of one pair."""
    if mean is None:
        assert won is not None
        b, c = int(won[i, j]), int(won[j, i])
        return b, c, None, c > b
    difference = r12(float(mean[i, j]))
    return None, None, difference, difference > 0


def _rankable(entrant: Entrant) -> bool:
    """An entrant is ranked when it executed an example and has a score."""
    return bool(len(entrant.examples)) and entrant.score is not None


def rank_board(entrants: Sequence[Entrant], test: PairedTest, alpha: float) -> Board:
    """Rank the entrants that executed an example; the others are excluded."""
    excluded = [(e, NO_EXECUTED_EXAMPLE) for e in entrants if not _rankable(e)]
    ranked = _order([e for e in entrants if _rankable(e)])
    k = len(ranked)
    executed, values = _matrices(ranked)
    won: NDArray[np.int64] | None = None
    mean: NDArray[np.float64] | None = None
    if test == "mcnemar_exact":
        shared, won, p = mcnemar_pairs(executed, values)
    else:
        shared, mean, p = paired_t_pairs(executed, values)
    better = np.zeros((k, k), dtype=bool)  # better[i, j]: i significantly better than j
    pairs = _decided_pairs(ranked, (shared, won, mean, p), alpha, better)
    scores = [e.score or 0.0 for e in ranked]
    placed = [
        Placed(
            entrant,
            1 + sum(1 for other in scores if other > scores[i]),
            (1 + int(better[:, i].sum()), k - int(better[i, :].sum())),
        )
        for i, entrant in enumerate(ranked)
    ]
    top_group = [e.subject for i, e in enumerate(ranked) if k and not better[0, i]]
    return Board(placed, pairs, excluded, top_group, test, alpha)


def _decided_pairs(
    ranked: list[Entrant],
    tested: tuple[
        NDArray[np.int64],
        NDArray[np.int64] | None,
        NDArray[np.float64] | None,
        NDArray[np.float64],
    ],
    alpha: float,
    better: NDArray[np.bool_],
) -> list[PairResult]:
    """Every pair with Holm's adjusted p and its decision, marking `better` [i, j] when i is
    significantly better than j. `tested`: (n shared, b, mean difference, raw p)."""
    shared, won, mean, p = tested
    upper = np.triu_indices(len(ranked), 1)
    raw = np.array([r12(float(x)) for x in p[upper]])
    adjusted = np.array([r12(float(x)) for x in holm(raw)]) if len(raw) else raw
    pairs = []
    for index, (i, j) in enumerate(zip(*upper, strict=True)):
        significant = bool(adjusted[index] < alpha)
        b, c, difference, j_ahead = _direction(int(i), int(j), won, mean)
        winner = None
        if significant:
            top, bottom = (j, i) if j_ahead else (i, j)
            better[top, bottom] = True
            winner = ranked[top].subject
        pairs.append(
            PairResult(
                ranked[i].subject,
                ranked[j].subject,
                int(shared[i, j]),
                b,
                c,
                difference,
                float(raw[index]),
                float(adjusted[index]),
                winner,
            )
        )
    return pairs
