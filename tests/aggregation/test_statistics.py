"""Clustered examples, power and repeats (docs/verdicts.md, sections 7 to 9), each number
checked against an oracle: statsmodels (OLS with cluster-robust errors, the power solvers),
scipy (the t-test over cluster means, the standard error), and a plain loop bootstrap."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.power import NormalIndPower, TTestPower
from statsmodels.stats.proportion import proportion_effectsize

from app.aggregation.clusters import (
    cluster_bootstrap,
    clustered_p_value,
    clustered_se,
    design_effect,
    independent_se,
)
from app.aggregation.power import mde, n_needed, plan
from app.aggregation.stats import RESAMPLES, _index_means, bootstrap
from tests.aggregation.test_aggregation_rules import c, check, run


def statsmodels_cluster_se(values: np.ndarray, clusters: np.ndarray) -> float:
    """The oracle: OLS of the values on a constant, cluster-robust (CR1) covariance."""
    fitted = sm.OLS(values, np.ones((values.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": clusters}
    )
    return float(fitted.bse[0])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1, allow_nan=False), st.integers(0, 6)), min_size=3, max_size=60
    )
)
def test_the_cr1_standard_error_is_statsmodels(rows: list[tuple[float, int]]) -> None:
    values = np.array([v for v, _ in rows])
    clusters = np.array([g for _, g in rows], dtype=np.int64)
    ours = clustered_se(values, clusters)
    if np.unique(clusters).size < 2:
        assert ours is None
        return
    assert ours == pytest.approx(statsmodels_cluster_se(values, clusters), abs=1e-9)


def test_a_worked_clustered_check_by_hand_and_by_the_oracles() -> None:
    """Six examples in three clusters: a (1, 1, 0), b (1, 0), c (0). Mean 0.5; residual sums
    per cluster 0.5, 0, -0.5; CR1 SE^2 = 3/2 * 0.5 / 36 = 1/48; independent SE^2 =
    (0.3) / 6 = 0.05; design effect (1/48) / 0.05 = 5/12."""
    values = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    clusters = np.array([0, 0, 0, 1, 1, 2])
    assert clustered_se(values, clusters) == pytest.approx(math.sqrt(1 / 48), abs=1e-12)
    assert clustered_se(values, clusters) == pytest.approx(
        statsmodels_cluster_se(values, clusters), abs=1e-9
    )
    assert independent_se(values) == pytest.approx(stats.sem(values), abs=1e-12)
    assert design_effect(values, clusters) == pytest.approx(5 / 12, abs=1e-12)
    # The same through the engine: a pass_rate check with cluster_tag_prefix "p:".
    passes = {0: "pass", 1: "pass", 2: "fail", 3: "pass", 4: "fail", 5: "fail"}
    tags = {0: "p:a", 1: "p:a", 2: "p:a", 3: "p:b", 4: "p:b", 5: "p:c"}
    # First edition (a report issued before section 10 replays under it).
    body = run_clustered(
        [check(cluster_tag_prefix="p:", threshold=0.4)],
        [c(i, status) for i, status in passes.items()],
        tags,
        edition=1,
    )
    result = body["checks"][0]
    assert result["score"] == 0.5
    assert result["interval"]["method"] == "cluster_bootstrap_percentile/pcg64"
    observed = {o["code"]: o for o in result["observations"]}
    assert observed["clusters"]["count"] == 3
    assert observed["design_effect"]["detail"] == pytest.approx(5 / 12, abs=1e-12)
    assert observed["mde"]["detail"]["se"] == pytest.approx(math.sqrt(1 / 48), abs=1e-12)
    assert observed["mde"]["detail"]["mde"] == pytest.approx(
        (stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * math.sqrt(1 / 48), abs=1e-12
    )


def run_clustered(
    checks: list[dict[str, Any]],
    cases: list[dict[str, Any]],
    tags: dict[int, str],
    *,
    n: int = 6,
    rule: dict[str, Any] | None = None,
    baseline: list[dict[str, Any]] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """`run` of tests/aggregation/test_aggregation_rules.py, with cluster tags on the examples."""
    from tests.aggregation import test_aggregation_rules as rules

    original = rules.dataset

    def tagged(n: int = 10, de: tuple[int, ...] = (0, 1, 2)) -> dict[str, Any]:
        data = original(n, de)
        for example in data["examples"]:
            i = int(example["id"][1:])
            if i in tags:
                example["tags"] = [*example["tags"], tags[i]]
        return data

    rules.dataset = tagged
    try:
        return rules.run(checks, cases, n=n, rule=rule, baseline=baseline, **options)
    finally:
        rules.dataset = original


def loop_cluster_bootstrap(
    values: np.ndarray, clusters: np.ndarray, alpha: float, seed: int
) -> tuple[float, float]:
    """A plain implementation: draw clusters one resample at a time, pool their values."""
    rng = np.random.default_rng(seed)
    labels = np.unique(clusters)
    members = {g: values[clusters == g] for g in labels}
    means = []
    for _ in range(RESAMPLES):
        drawn = rng.choice(labels, size=labels.size, replace=True)
        pooled = np.concatenate([members[g] for g in drawn])
        means.append(pooled.mean())
    lower, upper = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(lower), float(upper)


def test_the_cluster_bootstrap_draws_as_a_plain_loop_does() -> None:
    rng = np.random.default_rng(7)
    clusters = np.repeat(np.arange(25), rng.integers(1, 6, size=25))
    effects = rng.normal(0, 0.25, size=25)[clusters]
    values = np.clip(0.6 + effects + rng.normal(0, 0.2, size=clusters.size), 0, 1)
    reference = np.array([loop_cluster_bootstrap(values, clusters, 0.05, s) for s in range(40)])
    low, high = reference.min(axis=0), reference.max(axis=0)
    spread = high - low
    for seed in range(10):
        interval = cluster_bootstrap(values, clusters, 0.05, seed)
        assert low[0] - spread[0] / 2 <= interval.lower <= high[0] + spread[0] / 2
        assert low[1] - spread[1] / 2 <= interval.upper <= high[1] + spread[1] / 2


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=80), st.integers(0, 2**48))
def test_clusters_of_one_draw_exactly_the_index_bootstrap(values: list[float], seed: int) -> None:
    array = np.array(values)
    interval = cluster_bootstrap(array, np.arange(array.size), 0.05, seed)
    means = _index_means(array, np.random.Generator(np.random.PCG64(seed)), RESAMPLES)
    lower, upper = np.percentile(means, [2.5, 97.5])
    assert (interval.lower, interval.upper) == (pytest.approx(lower), pytest.approx(upper))


def test_clusters_of_one_give_todays_interval_distribution() -> None:
    values = np.array([1.0] * 30 + [0.0] * 20)
    ours = np.array(
        [
            [(i := cluster_bootstrap(values, np.arange(50), 0.05, s)).lower, i.upper]
            for s in range(60)
        ]
    )
    today = np.array([[(i := bootstrap(values, 0.05, s)).lower, i.upper] for s in range(60)])
    assert np.abs(ours.mean(axis=0) - today.mean(axis=0)).max() < 0.01


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=10, max_size=40).filter(
        lambda v: np.std(v) > 0.05
    ),
    st.integers(0, 2**32),
)
def test_duplicating_every_cluster_never_narrows_the_interval(
    values: list[float], seed: int
) -> None:
    doubled = np.repeat(np.array(values), 2)
    pairs = np.repeat(np.arange(len(values)), 2)
    clustered = cluster_bootstrap(doubled, pairs, 0.05, seed)
    independent = cluster_bootstrap(doubled, np.arange(doubled.size), 0.05, seed)
    assert clustered.upper - clustered.lower >= independent.upper - independent.lower
    effect = design_effect(doubled, pairs)
    assert effect is not None and effect >= 1.0


def test_the_clustered_comparison_is_scipys_t_test_over_cluster_means() -> None:
    rng = np.random.default_rng(3)
    clusters = np.repeat(np.arange(12), 4)
    differences = rng.normal(0.05, 0.3, size=clusters.size)
    means = np.array([differences[clusters == g].mean() for g in range(12)])
    for delta0 in (-0.1, 0.0, 0.1):
        expected = stats.ttest_1samp(means, delta0, alternative="greater").pvalue
        assert clustered_p_value(differences, clusters, delta0) == pytest.approx(
            expected, abs=1e-12
        )
    assert clustered_p_value(differences, np.zeros(clusters.size, dtype=np.int64), 0.0) == 1.0


def test_a_clustered_comparison_in_a_first_edition_report() -> None:
    tags = {i: f"p:{i // 3}" for i in range(12)}
    candidate = [c(i, "pass" if i % 4 else "fail") for i in range(12)]
    baseline = [c(i, "pass" if i % 3 else "fail") for i in range(12)]
    body = run_clustered(
        [check(cluster_tag_prefix="p:")],
        candidate,
        tags,
        n=12,
        rule={"rule": "non_inferiority", "margin": 0.1},
        baseline=baseline,
        edition=1,
    )
    result = body["checks"][0]
    comparison = result["comparison"]
    assert comparison["method"] == "paired_t_clustered" and comparison["clusters"] == 4
    differences = np.array([(i % 4 != 0) - (i % 3 != 0) for i in range(12)], dtype=float)
    means = differences.reshape(4, 3).mean(axis=1)
    expected = stats.ttest_1samp(means, -0.1, alternative="greater").pvalue
    assert comparison["p_value"] == pytest.approx(expected, abs=1e-12)
    assert result["interval"]["method"].startswith("cluster_bootstrap")


def test_an_unclustered_suite_keeps_its_comparison_and_interval() -> None:
    body = run([check()], [c(i, "pass" if i % 3 else "fail") for i in range(10)])
    result = body["checks"][0]
    assert result["interval"]["method"] == "wilson"
    assert not any(o["code"] in ("clusters", "design_effect") for o in result["observations"])


def test_mde_and_an_underpowered_inconclusive_check_in_the_first_edition() -> None:
    statuses = ["pass" if i % 2 else "fail" for i in range(10)]
    body = run(
        [check(threshold=0.55)],
        [c(i, s) for i, s in enumerate(statuses)],
        rule={"rule": "interval"},
        edition=1,
    )
    result = body["checks"][0]
    assert result["status"] == "inconclusive"
    values = np.array([1.0 if s == "pass" else 0.0 for s in statuses])
    se = stats.sem(values)
    expected_mde = (stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * se
    observed = {o["code"]: o["detail"] for o in result["observations"]}
    assert observed["mde"]["se"] == pytest.approx(se, abs=1e-12)
    assert observed["mde"]["mde"] == pytest.approx(expected_mde, abs=1e-12)
    needed = math.ceil(10 * (expected_mde / 0.05) ** 2)
    assert observed["underpowered"] == {"n": 10, "n_needed": needed}
    assert f"about {needed} examples would settle it" in result["explanation"]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 10_000),
    st.floats(0.001, 1.0),
    st.floats(0.0001, 1.0),
    st.floats(0.0001, 1.0),
)
def test_n_needed_is_monotone_in_the_distance(n: int, mde_value: float, a: float, b: float) -> None:
    near, far = sorted((a, b))
    at_near, at_far = n_needed(n, mde_value, near), n_needed(n, mde_value, far)
    # None: beyond any practical size, as if infinite.
    assert (at_near if at_near is not None else math.inf) >= (
        at_far if at_far is not None else math.inf
    )


def test_mde_is_the_normal_formula() -> None:
    assert mde(0.1, 0.05) == pytest.approx((stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * 0.1)


@pytest.mark.parametrize(
    ("baseline", "effect", "alpha", "power"),
    [(0.7, 0.05, 0.05, 0.8), (0.5, 0.1, 0.01, 0.9), (0.9, -0.05, 0.05, 0.8), (0.2, 0.3, 0.1, 0.5)],
)
def test_planning_a_pass_rate_is_normal_ind_power(
    baseline: float, effect: float, alpha: float, power: float
) -> None:
    h = abs(proportion_effectsize(baseline + effect, baseline))
    expected = NormalIndPower().solve_power(h, alpha=alpha, power=power, alternative="larger")
    assert plan("pass_rate", baseline, effect, alpha, power).n == math.ceil(expected)


@pytest.mark.parametrize(("sd", "effect"), [(1.0, 0.2), (0.3, 0.05), (2.0, -1.5)])
def test_planning_a_mean_is_normal_ind_power(sd: float, effect: float) -> None:
    expected = NormalIndPower().solve_power(
        abs(effect) / sd, alpha=0.05, power=0.8, alternative="larger"
    )
    assert plan("mean", sd, effect, 0.05, 0.8).n == math.ceil(expected)


@pytest.mark.parametrize(
    ("sd", "effect", "correlation"), [(1.0, 0.2, None), (0.5, 0.4, None), (1.0, 0.3, 0.6)]
)
def test_planning_paired_runs_is_ttest_power(
    sd: float, effect: float, correlation: float | None
) -> None:
    sd_d = sd if correlation is None else sd * math.sqrt(2 * (1 - correlation))
    expected = TTestPower().solve_power(effect / sd_d, alpha=0.05, power=0.8, alternative="larger")
    assert plan("paired", sd, effect, 0.05, 0.8, correlation).n == math.ceil(expected)
    doubled = plan("paired", sd, effect, 0.05, 0.8, correlation, design_effect=2.0).n
    assert doubled == math.ceil(expected * 2 - 1e-9)


def test_repeats_show_flaky_examples_pass_all_and_pass_any() -> None:
    # e00: pass pass pass; e01: pass fail pass (flaky); e02: fail fail fail;
    # e03: fail pass fail (flaky); e04: error in one repeat (not executed, but flaky: no).
    pattern = {0: "ppp", 1: "pfp", 2: "fff", 3: "fpf", 4: "pep"}
    letters = {"p": "pass", "f": "fail", "e": "error"}
    cases = [c(i, letters[s], repeat=r) for i, row in pattern.items() for r, s in enumerate(row)]
    body = run([check(repeats=3, min_coverage=0.5)], cases, n=5)
    observed = {o["code"]: o for o in body["checks"][0]["observations"]}
    assert observed["flaky_examples"] == {
        "code": "flaky_examples",
        "count": 2,
        "detail": ["e01", "e03"],
    }
    # Executed: e00..e03. pass^3: e00 only; pass@3: e00, e01, e03.
    assert observed["pass_all_repeats"]["detail"] == pytest.approx(1 / 4)
    assert observed["pass_any_repeat"]["detail"] == pytest.approx(3 / 4)
    single = run([check()], [c(i) for i in range(10)])
    assert not any(o["code"] == "flaky_examples" for o in single["checks"][0]["observations"])
