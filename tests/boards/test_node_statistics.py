"""The Node verifier's own statistics for boards (verify-bundle.mjs) against the oracles:
scipy's regularized incomplete beta and paired t-test, statsmodels' exact McNemar and Holm,
within the tolerance the verifiers compare p-values at (app/bundles/board_ranks.py)."""

from __future__ import annotations

import numpy as np
from scipy import special, stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from app.bundles.board_ranks import close
from tests.bundle_helpers import node_map


def test_incomplete_beta_matches_scipy() -> None:
    rng = np.random.default_rng(20261205)
    cases = [
        [float(x), float(a), float(b)]
        for x, a, b in zip(
            rng.uniform(0, 1, 300),
            rng.uniform(0.5, 5000, 300),
            rng.uniform(0.5, 5000, 300),
            strict=True,
        )
    ]
    cases += [[0.5, 1_000_000.0, 999_001.0], [0.3, 0.5, 0.5], [0.999, 2.0, 3.0], [1e-6, 0.5, 40.0]]
    answers = node_map("incompleteBeta", cases, spread=True)
    for (x, a, b), got in zip(cases, answers, strict=True):
        assert close(got, float(special.betainc(a, b, x))), (x, a, b, got)


def test_mcnemar_matches_statsmodels() -> None:
    pairs = [[b, c] for b in (0, 1, 2, 5, 17, 40, 300) for c in (0, 1, 3, 9, 40, 301, 2000)]
    answers = node_map("mcnemarExact", pairs, spread=True)
    for (b, c), got in zip(pairs, answers, strict=True):
        expected = 1.0 if b + c == 0 else float(mcnemar([[0, b], [c, 0]], exact=True).pvalue)
        assert close(got, expected), (b, c, got, expected)


def test_paired_t_matches_scipy() -> None:
    rng = np.random.default_rng(7)
    inputs, expected = [], []
    for n in (2, 3, 10, 500, 20_000):
        x = rng.uniform(0, 1, n)
        y = np.clip(x + rng.normal(0.01, 0.2, n), 0, 1)
        d = y - x
        mean = float(d.mean())
        inputs.append([mean, float(((d - mean) ** 2).sum()), n])
        expected.append(float(stats.ttest_rel(y, x).pvalue))
    answers = node_map("pairedT", inputs, spread=True)
    for got, want in zip(answers, expected, strict=True):
        assert close(got, want), (got, want)


def test_holm_matches_statsmodels() -> None:
    rng = np.random.default_rng(11)
    families = [rng.uniform(0, 0.2, m).tolist() for m in (1, 2, 7, 45, 300)]
    families.append([0.01, 0.01, 0.04, 0.04, 0.5])
    answers = node_map("holm", families)
    for p_values, got in zip(families, answers, strict=True):
        want = multipletests(p_values, alpha=0.05, method="holm")[1]
        assert all(close(g, float(w)) for g, w in zip(got, want, strict=True)), (got, want)
