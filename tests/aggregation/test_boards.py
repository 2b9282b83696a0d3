"""Boards' statistics (docs/boards.md) against the oracles: statsmodels' exact McNemar and Holm,
scipy's paired t-test, rank intervals against a plain loop, and the seeded simulation of the
contract: over 500 boards, a truly equal pair declared different or a pair ordered the wrong
way happens at most alpha of the time (family-wise)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from app.aggregation.boards import NO_EXECUTED_EXAMPLE, Entrant, holm, rank_board
from app.aggregation.rounding import r12

ALPHA = 0.05


def entrants(values: np.ndarray, executed: np.ndarray) -> list[Entrant]:
    """One entrant per row; its score the mean of what it executed."""
    out = []
    for row in range(values.shape[0]):
        mine = {
            f"e{n:04d}": float(values[row, n]) for n in range(values.shape[1]) if executed[row, n]
        }
        score = r12(sum(mine.values()) / len(mine)) if mine else None
        out.append(Entrant.of(f"sha1:{row:040x}", f"r{row}", score, mine))
    return out


def test_mcnemar_pairs_match_statsmodels() -> None:
    rng = np.random.default_rng(20261205)
    values = (rng.random((7, 60)) < rng.uniform(0.4, 0.9, (7, 1))).astype(float)
    executed = rng.random((7, 60)) < 0.85
    board = rank_board(entrants(values, executed), "mcnemar_exact", ALPHA)
    by_subject = {p.entrant.subject: p.entrant.value_of() for p in board.placed}
    raw = []
    for pair in board.pairs:
        a, b = by_subject[pair.first], by_subject[pair.second]
        common = sorted(set(a) & set(b))
        won = sum(1 for e in common if a[e] == 1.0 and b[e] == 0.0)
        lost = sum(1 for e in common if a[e] == 0.0 and b[e] == 1.0)
        assert (pair.n, pair.b, pair.c) == (len(common), won, lost)
        table = [[0, won], [lost, 0]]
        expected = mcnemar(table, exact=True).pvalue if len(common) >= 2 else 1.0
        assert pair.p_value == r12(expected)
        raw.append(pair.p_value)
    reject, adjusted, _, _ = multipletests(raw, ALPHA, method="holm")
    assert [p.p_adjusted for p in board.pairs] == [r12(x) for x in adjusted]
    assert [p.better is not None for p in board.pairs] == [
        bool(a < ALPHA) for a in [r12(x) for x in adjusted]
    ]
    assert list(reject) == [p.better is not None for p in board.pairs]


def test_paired_t_pairs_match_scipy() -> None:
    rng = np.random.default_rng(7)
    values = rng.normal(rng.uniform(0.2, 0.8, (6, 1)), 0.2, (6, 80))
    executed = rng.random((6, 80)) < 0.9
    board = rank_board(entrants(values, executed), "paired_t", ALPHA)
    by_subject = {p.entrant.subject: p.entrant.value_of() for p in board.placed}
    for pair in board.pairs:
        a, b = by_subject[pair.first], by_subject[pair.second]
        common = sorted(set(a) & set(b))
        first = [a[e] for e in common]
        second = [b[e] for e in common]
        oracle = stats.ttest_rel(second, first)
        assert pair.n == len(common)
        assert pair.mean_difference == pytest.approx(
            float(np.mean(np.subtract(second, first))), abs=1e-11
        )
        assert pair.p_value == pytest.approx(float(oracle.pvalue), rel=1e-9, abs=1e-12)


def test_holm_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    for size in (1, 2, 10, 45):
        p = rng.random(size) ** 3
        assert holm(p) == pytest.approx(multipletests(p, ALPHA, method="holm")[1], abs=1e-15)


def test_rank_intervals_against_a_plain_loop() -> None:
    rng = np.random.default_rng(11)
    rates = np.array([0.55, 0.6, 0.6, 0.7, 0.8, 0.82, 0.95])
    values = (rng.random((7, 300)) < rates[:, None]).astype(float)
    board = rank_board(entrants(values, np.ones_like(values, dtype=bool)), "mcnemar_exact", ALPHA)
    subjects = [p.entrant.subject for p in board.placed]
    k = len(subjects)
    beats = {
        (p.better, p.second if p.better == p.first else p.first) for p in board.pairs if p.better
    }
    for placed in board.placed:
        me = placed.entrant.subject
        above = sum(1 for other in subjects if (other, me) in beats)
        below = sum(1 for other in subjects if (me, other) in beats)
        assert placed.rank_interval == (1 + above, k - below)
        higher = sum(
            1 for p in board.placed if (p.entrant.score or 0) > (placed.entrant.score or 0)
        )
        assert placed.rank == 1 + higher
        assert placed.rank_interval[0] <= placed.rank <= placed.rank_interval[1]
    first = subjects[0]
    assert board.top_group == [s for s in subjects if (first, s) not in beats]
    assert board.top_group[0] == first and len(board.top_group) < k


def test_exclusions_ties_and_too_few_shared_examples() -> None:
    a = Entrant.of("sha1:" + "a" * 40, "ra", 1.0, {"e1": 1.0})
    b = Entrant.of("sha1:" + "b" * 40, "rb", 1.0, {"e1": 1.0, "e2": 1.0})
    none = Entrant.of("sha1:" + "c" * 40, "rc", None, {})
    board = rank_board([b, none, a], "mcnemar_exact", ALPHA)
    assert [(e.subject, why) for e, why in board.excluded] == [(none.subject, NO_EXECUTED_EXAMPLE)]
    assert [p.entrant.subject for p in board.placed] == [a.subject, b.subject]  # tie: by digest
    assert [p.rank for p in board.placed] == [1, 1]
    (pair,) = board.pairs
    assert (pair.n, pair.p_value, pair.better) == (1, 1.0, None)
    flat = [
        Entrant.of(f"sha1:{i:040x}", f"r{i}", float(i), {f"e{n}": float(i) for n in range(5)})
        for i in range(3)
    ]
    (one, two, three) = rank_board(flat, "paired_t", ALPHA).pairs
    assert {one.p_value, two.p_value, three.p_value} == {0.0}  # constant nonzero differences


def test_family_wise_error_at_most_alpha_over_500_boards() -> None:
    rates = np.array([0.70, 0.70, 0.70, 0.72, 0.75, 0.78, 0.81, 0.84, 0.87, 0.90])
    rng = np.random.default_rng(20261205)
    wrong_boards = 0
    separated: dict[tuple[int, int], int] = {}
    for _ in range(500):
        values = (rng.random((10, 500)) < rates[:, None]).astype(float)
        people = entrants(values, np.ones_like(values, dtype=bool))
        index = {e.subject: i for i, e in enumerate(people)}
        board = rank_board(people, "mcnemar_exact", ALPHA)
        wrong = False
        for pair in board.pairs:
            i, j = sorted((index[pair.first], index[pair.second]))
            if pair.better is None:
                continue
            if rates[i] == rates[j] or index[pair.better] == i:  # equal, or the worse one ahead
                wrong = True
            else:
                separated[(i, j)] = separated.get((i, j), 0) + 1
        wrong_boards += wrong
    rate = wrong_boards / 500
    print(f"family-wise error over 500 boards: {rate:.3f} (alpha {ALPHA})")
    for (i, j), count in sorted(separated.items()):
        print(f"  {rates[i]:.2f} vs {rates[j]:.2f}: separated in {count / 500:.0%} of boards")
    assert rate <= ALPHA
    assert separated.get((0, 9), 0) > 450  # 0.70 against 0.90 on 500 examples: nearly always


def test_the_complete_fast_path_equals_the_masked_path() -> None:
    """Entrants that all executed the same examples skip the executed mask (`None`): the counts
    are the same, the paired sums the same to rounding, the p-values the same at 12 digits."""
    from app.aggregation.boards import mcnemar_pairs, paired_t_pairs

    rng = np.random.default_rng(3)
    passed = (rng.random((9, 400)) < 0.7).astype(float)
    everyone = np.ones_like(passed)
    fast, masked = mcnemar_pairs(None, passed), mcnemar_pairs(everyone, passed)
    assert (fast[0] == masked[0]).all() and (fast[1] == masked[1]).all()
    assert (fast[2] == masked[2]).all()
    scores = rng.normal(0.5, 0.2, (9, 400))
    fast_t, masked_t = paired_t_pairs(None, scores), paired_t_pairs(everyone, scores)
    assert (fast_t[0] == masked_t[0]).all()
    assert np.allclose(fast_t[1], masked_t[1], rtol=1e-12, atol=1e-15)
    assert [r12(x) for x in fast_t[2].ravel()] == pytest.approx(
        [r12(x) for x in masked_t[2].ravel()], rel=1e-9
    )
