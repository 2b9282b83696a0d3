"""The second edition of the statistics rules (docs/verdicts.md, section 10): each misleading
verdict an independent check found, as a test with the verdict it must now give; the numbers
against statsmodels and scipy; seeded simulations of coverage, power and re-evaluation."""

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
from statsmodels.stats.proportion import proportion_confint, proportion_effectsize

from app.aggregation.compare import rounded_paired_p_value
from app.aggregation.looks import alpha_spent
from app.aggregation.power import plan
from app.aggregation.robust import robust_error, robust_interval, robust_p_value
from app.aggregation.rounding import moments, r12
from app.aggregation.stats import wilson
from tests.aggregation.test_aggregation_rules import c, check, run
from tests.aggregation.test_statistics import run_clustered

MEAN = {"method": "mean", "threshold": 0.7}


def observed(result: dict[str, Any], slice_name: str | None = None) -> dict[str, Any]:
    """A group's observations by code."""
    return {o["code"]: o for o in result["observations"] if o.get("slice") == slice_name}


# 10.1 Decisions on rounded values


def test_all_scores_at_the_bar_pass_under_the_interval_rule_as_under_threshold() -> None:
    cases = [c(i, score=0.7) for i in range(6)]
    for rule in ("interval", "threshold"):
        result = run(
            [check(method="mean", threshold=0.7, scorer="r")], cases, n=6, rule={"rule": rule}
        )["checks"][0]
        assert result["status"] == "pass", (rule, result["explanation"])
        assert result["score"] == 0.7
    interval = result["interval"]
    assert (interval["lower"], interval["upper"]) == (0.7, 0.7)
    # The first edition, kept for replay, failed it: 0.7000000000000001 against an interval
    # [0.6999999999999998, 0.6999999999999998] that excluded its own estimate.
    first = run(
        [check(method="mean", threshold=0.7, scorer="r")],
        cases,
        n=6,
        rule={"rule": "interval"},
        edition=1,
    )["checks"][0]
    assert first["status"] == "fail" and first["score"] != 0.7


def test_rounding_is_twelve_significant_digits_of_a_correctly_rounded_sum() -> None:
    values = np.array([0.1] * 10 + [0.2] * 7)
    assert moments(values).mean == math.fsum(values) / values.size
    assert r12(0.1 + 0.2) == 0.3 and r12(1e-20 + 1 / 3) == 0.333333333333
    assert r12(moments(values).mean) == float(f"{math.fsum(values) / values.size:.12g}")
    both = moments(np.array([1.0, 0.0, 1.0, 1.0]))
    assert both.mean == 0.75 and both.sd == pytest.approx(np.std([1, 0, 1, 1], ddof=1), abs=0)


# 10.2 No design effect without variance


def test_no_design_effect_or_mde_without_variance() -> None:
    tags = {i: f"p:{i % 5}" for i in range(10)}
    body = run_clustered(
        [check(method="mean", threshold=0.5, scorer="r", cluster_tag_prefix="p:")],
        [c(i, score=0.7) for i in range(10)],
        tags,
        n=10,
    )
    found = observed(body["checks"][0])
    assert found["clusters"]["count"] == 5
    assert "design_effect" not in found and "mde" not in found


# 10.3 Cluster-robust inference


def regressed_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, str]]:
    """100 examples: a cluster of 40 fully regressed (pass -> fail), 60 unchanged singletons."""
    candidate = [c(i, "fail" if i < 40 else ("pass" if i % 2 else "fail")) for i in range(100)]
    baseline = [c(i, "pass" if i < 40 or i % 2 else "fail") for i in range(100)]
    return candidate, baseline, {i: "p:big" for i in range(40)}


def test_a_fully_regressed_cluster_fails_non_inferiority() -> None:
    candidate, baseline, tags = regressed_cluster()
    rule = {"rule": "non_inferiority", "margin": 0.1}
    body = run_clustered(
        [check(cluster_tag_prefix="p:")], candidate, tags, n=100, rule=rule, baseline=baseline
    )
    result = body["checks"][0]
    comparison = result["comparison"]
    assert result["score"] == -0.4
    assert comparison["method"] == "paired_t_cluster_robust" and comparison["clusters"] == 61
    assert comparison["p_value"] > 0.5 and result["status"] == "fail"
    # The test averaging cluster means passed it with p = 1.8e-6; that rule stays for replay.
    first = run_clustered(
        [check(cluster_tag_prefix="p:")],
        candidate,
        tags,
        n=100,
        rule=rule,
        baseline=baseline,
        edition=1,
    )["checks"][0]
    assert first["status"] == "pass" and first["comparison"]["p_value"] < 1e-5
    # The unclustered twin fails as well.
    twin = run([check()], candidate, n=100, rule=rule, baseline=baseline)["checks"][0]
    assert twin["status"] == "fail"


def test_one_cluster_is_too_few_clusters_not_a_point_interval_pass() -> None:
    body = run_clustered(
        [check(cluster_tag_prefix="p:", threshold=0.5)],
        [c(i) for i in range(10)],
        {i: "p:one" for i in range(10)},
        n=10,
        rule={"rule": "interval"},
    )
    result = body["checks"][0]
    assert result["status"] == "inconclusive"
    assert body["reasons"] == [
        {
            "code": "check_inconclusive",
            "check_id": "c",
            "status": "inconclusive",
            "step": "too_few_clusters",
        }
    ]
    assert "1 cluster" in result["explanation"] and "at least 5" in result["explanation"]
    assert observed(result)["too_few_clusters"]["detail"] == {"clusters": 1, "min_clusters": 5}


def test_too_few_clusters_yields_to_an_already_failed_check() -> None:
    body = run_clustered(
        [check(cluster_tag_prefix="p:", threshold=0.9)],
        [c(i, "fail") for i in range(10)],
        {i: "p:one" for i in range(10)},
        n=10,
    )
    assert body["checks"][0]["status"] == "fail"
    assert body["reasons"][0]["step"] == "already_failed"


def test_two_clusters_of_equal_means_do_not_give_p_zero() -> None:
    # Differences +1, 0, -1 in each of two clusters: both cluster means 0.
    candidate = [c(i, "pass" if i % 3 != 2 else "fail") for i in range(6)]
    baseline = [c(i, "pass" if i % 3 != 0 else "fail") for i in range(6)]
    tags = {i: f"p:{i // 3}" for i in range(6)}
    rule = {"rule": "superiority", "margin": 0}
    inconclusive = run_clustered(
        [check(cluster_tag_prefix="p:")], candidate, tags, rule=rule, baseline=baseline
    )["checks"][0]
    assert inconclusive["status"] == "inconclusive"
    assert "2 clusters" in inconclusive["explanation"]
    allowed = run_clustered(
        [check(cluster_tag_prefix="p:", min_clusters=2)],
        candidate,
        tags,
        rule=rule,
        baseline=baseline,
    )["checks"][0]
    assert allowed["comparison"]["p_value"] == 0.5 and allowed["status"] == "fail"
    first = run_clustered(
        [check(cluster_tag_prefix="p:")], candidate, tags, rule=rule, baseline=baseline, edition=1
    )["checks"][0]
    assert first["comparison"]["p_value"] == 1.0  # 0 at delta0 = 0, 0 for any delta0 < 0


def statsmodels_fit(values: np.ndarray, clusters: np.ndarray) -> Any:
    """The oracle: OLS on a constant, CR1 covariance, t reference with G - 1 df."""
    return sm.OLS(values, np.ones((values.size, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": clusters}, use_t=True
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 12), st.sampled_from([-0.2, 0.0, 0.1]))
def test_cr1_and_the_t_reference_are_statsmodels(seed: int, groups: int, delta0: float) -> None:
    rng = np.random.default_rng(seed)
    clusters = np.repeat(np.arange(groups), rng.integers(1, 6, size=groups))
    effects = rng.normal(0, 0.3, size=groups)[clusters]
    values = effects + rng.normal(0.05, 0.2, size=clusters.size)
    sample = moments(values)
    error = robust_error(values, clusters, sample)
    assert error is not None
    fitted = statsmodels_fit(values, clusters)
    assert error.clustered == pytest.approx(float(fitted.bse[0]), abs=1e-9)
    assert error.df == groups - 1 == int(fitted.df_resid_inference)
    unclustered = sm.OLS(values, np.ones((values.size, 1))).fit()
    assert error.independent == pytest.approx(float(unclustered.bse[0]), abs=1e-9)
    estimate = r12(sample.mean)
    interval = robust_interval(estimate, error, 0.05, None)
    if error.clustered >= error.independent:
        lower, upper = fitted.conf_int(alpha=0.05)[0]
        assert (interval.lower, interval.upper) == (
            pytest.approx(lower, abs=1e-9),
            pytest.approx(upper, abs=1e-9),
        )
        tested = fitted.t_test((np.array([[1.0]]), np.array([delta0])))
        t_value, two_sided = float(tested.tvalue.item()), float(tested.pvalue)
        one_sided = two_sided / 2 if t_value > 0 else 1 - two_sided / 2
        assert robust_p_value(estimate, error, delta0) == pytest.approx(one_sided, abs=1e-9)
    else:
        # Floored: the independent standard error with the clustered degrees of freedom.
        half = stats.t.ppf(0.975, groups - 1) * float(unclustered.bse[0])
        assert interval.upper - interval.lower == pytest.approx(2 * half, abs=1e-9)


@pytest.mark.parametrize(("groups", "least"), [(3, 0.90), (5, 0.90), (10, 0.92), (30, 0.93)])
def test_the_clustered_interval_covers(groups: int, least: float) -> None:
    """5,000 seeded runs of pass/fail examples in clusters of 2 to 8 whose pass rates vary
    around 0.7: the 95 % cluster-robust interval holds 0.7 at least `least` of the time."""
    rng = np.random.default_rng(groups)
    held = 0
    for _ in range(5000):
        clusters = np.repeat(np.arange(groups), rng.integers(2, 9, size=groups))
        rates = np.clip(0.7 + rng.normal(0, 0.15, size=groups), 0.01, 0.99)[clusters]
        values = (rng.random(clusters.size) < rates).astype(float)
        sample = moments(values)
        error = robust_error(values, clusters, sample)
        assert error is not None
        interval = robust_interval(r12(sample.mean), error, 0.05, (0.0, 1.0))
        held += interval.lower <= 0.7 <= interval.upper
    assert held / 5000 >= least


# 10.4 Power consistent with the decision


def test_the_mde_uses_the_critical_value_of_the_decision() -> None:
    statuses = ["pass" if i % 2 else "fail" for i in range(10)]
    cases = [c(i, s) for i, s in enumerate(statuses)]
    se = stats.sem([1.0 if s == "pass" else 0.0 for s in statuses])
    interval = run([check(threshold=0.55)], cases, rule={"rule": "interval"})["checks"][0]
    detail = observed(interval)["mde"]["detail"]
    assert detail["critical"] == pytest.approx(stats.norm.ppf(0.975), abs=1e-11)
    expected = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * se
    assert detail["mde"] == pytest.approx(expected, abs=1e-11)
    needed = math.ceil(10 * (detail["mde"] / 0.05) ** 2 - 1e-9)
    assert observed(interval)["underpowered"]["detail"] == {"n": 10, "n_needed": needed}
    threshold = run([check(threshold=0.55)], cases)["checks"][0]
    assert observed(threshold)["mde"]["detail"]["critical"] == pytest.approx(
        stats.norm.ppf(0.95), abs=1e-11
    )


def test_a_corrected_family_and_clusters_change_the_critical_value() -> None:
    baseline = [c(i, "pass" if i % 3 else "fail", check_id=k) for i in range(10) for k in "ab"]
    candidate = [c(i, "pass" if i % 4 else "fail", check_id=k) for i in range(10) for k in "ab"]
    rule = {"rule": "non_inferiority", "margin": 0.05, "correction": "holm"}
    body = run([check("a"), check("b")], candidate, rule=rule, baseline=baseline)
    detail = observed(body["checks"][0])["mde"]["detail"]
    assert body["checks"][0]["comparison"]["family_size"] == 2
    assert detail["critical"] == pytest.approx(stats.norm.ppf(1 - 0.05 / 2), abs=1e-11)
    tags = {i: f"p:{i // 2}" for i in range(10)}
    clustered = run_clustered(
        [check(cluster_tag_prefix="p:", threshold=0.5)],
        [c(i, "pass" if i % 3 else "fail") for i in range(10)],
        tags,
        n=10,
        rule={"rule": "interval"},
    )["checks"][0]
    detail = observed(clustered)["mde"]["detail"]
    assert detail["critical"] == pytest.approx(stats.t.ppf(0.975, 4), abs=1e-11)


def test_a_run_of_n_needed_examples_has_the_stated_power() -> None:
    """An inconclusive 60 of 100 against 0.55 under `interval`: the engine names n_needed; runs
    of that size at the observed rate pass 80 % of the time (4,000 seeded runs, +/- 3 points).

    The MDE is the normal one; Wilson's pull towards 0.5 costs a little power at small n far
    from 0.5 (76 of 100 against 0.7 reaches 76 %), as docs/verdicts.md says."""
    cases = [c(i, "pass" if i < 60 else "fail") for i in range(100)]
    result = run([check(threshold=0.55)], cases, n=100, rule={"rule": "interval"})["checks"][0]
    assert result["status"] == "inconclusive"
    needed = observed(result)["underpowered"]["detail"]["n_needed"]
    rng = np.random.default_rng(20261202)
    passes = rng.binomial(needed, 0.6, size=4000)
    decided = [wilson(int(k), needed, 0.05).lower >= 0.55 for k in passes]
    assert float(np.mean(decided)) == pytest.approx(0.8, abs=0.03)


def test_a_run_of_n_needed_clusters_has_the_stated_power() -> None:
    """The same with clusters: a run of 30 clusters of 4 whose pass rates vary is inconclusive;
    runs of n_needed clusters drawn from it (its variance, its mean) decided by the
    cluster-robust t interval pass 80 % of the time (4,000 seeded runs, +/- 3 points)."""
    rng = np.random.default_rng(5)
    clusters = np.repeat(np.arange(30), 4)
    rates = np.clip(0.78 + rng.normal(0, 0.12, size=30), 0, 1)[clusters]
    values = (rng.random(clusters.size) < rates).astype(float)
    tags = {i: f"p:{g}" for i, g in enumerate(clusters)}
    cases = [c(i, "pass" if v else "fail") for i, v in enumerate(values)]
    threshold = round(float(values.mean()) - 0.05, 3)
    result = run_clustered(
        [check(cluster_tag_prefix="p:", threshold=threshold)],
        cases,
        tags,
        n=values.size,
        rule={"rule": "interval"},
    )["checks"][0]
    assert result["status"] == "inconclusive", result["explanation"]
    needed = observed(result)["underpowered"]["detail"]["n_needed"]
    by_cluster = values.reshape(30, 4)
    passed = 0
    for _ in range(4000):
        drawn = by_cluster[rng.integers(0, 30, size=needed)].ravel()
        labels = np.repeat(np.arange(needed), 4)
        sample = moments(drawn)
        error = robust_error(drawn, labels, sample)
        assert error is not None
        interval = robust_interval(r12(sample.mean), error, 0.05, (0.0, 1.0))
        passed += interval.lower >= threshold
    assert passed / 4000 == pytest.approx(0.8, abs=0.03)


# Properties


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=40),
    st.integers(1, 8),
    st.floats(0.01, 0.3),
)
def test_an_interval_holds_its_estimate_and_clusters_never_narrow_it(
    values_list: list[float], groups: int, alpha: float
) -> None:
    values = np.array(values_list)
    clusters = np.arange(values.size) % groups
    singletons = np.arange(values.size)
    sample = moments(values)
    estimate = r12(sample.mean)
    clustered = robust_error(values, clusters, sample)
    independent = robust_error(values, singletons, sample)
    assert independent is not None
    alone = robust_interval(estimate, independent, alpha, (0.0, 1.0))
    assert alone.lower <= estimate <= alone.upper
    if clustered is None:
        return
    together = robust_interval(estimate, clustered, alpha, (0.0, 1.0))
    assert together.lower <= estimate <= together.upper
    assert together.lower <= alone.lower and together.upper >= alone.upper


@settings(max_examples=40, deadline=None)
@given(st.floats(0, 1, allow_nan=False), st.integers(2, 30), st.sampled_from(["p:", None]))
def test_identical_values_give_a_point_interval_and_no_design_effect(
    value: float, n: int, prefix: str | None
) -> None:
    tags = {i: f"p:{i % 5}" for i in range(n)}
    extra = {} if prefix is None else {"cluster_tag_prefix": prefix}
    body = run_clustered(
        [check(method="mean", threshold=0.5, scorer="r", **extra)],
        [c(i, score=value) for i in range(n)],
        tags,
        n=n,
        rule={"rule": "interval"},
    )
    result = body["checks"][0]
    assert result["score"] == r12(value)
    if result["interval"] is not None:
        assert result["interval"]["lower"] == result["interval"]["upper"] == r12(value)
    found = observed(result)
    assert "design_effect" not in found and "mde" not in found


def test_a_paired_p_value_on_rounded_numbers_is_scipys() -> None:
    rng = np.random.default_rng(1)
    d = rng.normal(0.02, 0.3, size=50)
    for delta0 in (-0.1, 0.0, 0.05):
        expected = stats.ttest_1samp(d, delta0, alternative="greater").pvalue
        assert rounded_paired_p_value(moments(d), delta0) == pytest.approx(expected, abs=1e-9)


# 10.6 Re-evaluation spending


def test_looks_spend_a_geometric_share_of_alpha() -> None:
    assert [alpha_spent(0.05, k) for k in (1, 2, 3)] == [0.04, 0.008, 0.0016]
    assert math.fsum(alpha_spent(0.05, k) for k in range(1, 60)) == pytest.approx(0.05)
    with pytest.raises(ValueError):
        alpha_spent(0.05, 0)


def test_the_look_and_the_alpha_spent_are_in_the_body_and_decide() -> None:
    # 90 of 100 against 0.8 under `interval`: a pass at the first look, not at the second.
    cases = [c(i, "pass" if i < 90 else "fail") for i in range(100)]
    checks = [check(threshold=0.8)]
    first = run(checks, cases, n=100, rule={"rule": "interval"}, look=1, spending="geometric")
    second = run(checks, cases, n=100, rule={"rule": "interval"}, look=2, spending="geometric")
    assert first["decision_rule"] | {"family": []} == {
        "rule": "interval",
        "alpha": 0.05,
        "margin": 0,
        "correction": "none",
        "family": [],
        "edition": 2,
        "look": 1,
        "alpha_spent": 0.04,
    }
    assert second["decision_rule"]["look"] == 2 and second["decision_rule"]["alpha_spent"] == 0.008
    assert first["checks"][0]["interval"]["level"] == 0.96
    assert second["checks"][0]["interval"]["level"] == 0.992
    lower, _ = proportion_confint(90, 100, alpha=0.04, method="wilson")
    assert first["checks"][0]["interval"]["lower"] == pytest.approx(lower, abs=1e-11)
    assert (first["result"], second["result"]) == ("pass", "inconclusive")
    # Without spending (or for a report that is no gate report) nothing is spent.
    plain = run(checks, cases, n=100, rule={"rule": "interval"}, look=None, spending="geometric")
    assert "look" not in plain["decision_rule"]


def test_re_running_until_green_stays_within_alpha_under_geometric_spending() -> None:
    """10,000 seeded chains of up to 10 re-evaluations of a subject whose true paired
    difference is just below the superiority bar: a chain passes when any look passes."""
    rng = np.random.default_rng(20261202)
    alpha, margin, chains, looks, pairs = 0.05, 0.0, 10_000, 10, 60
    passed = {"none": 0, "geometric": 0}
    for policy in passed:
        for _ in range(chains):
            for look in range(1, looks + 1):
                level = alpha if policy == "none" else alpha_spent(alpha, look)
                d = rng.normal(margin - 0.005, 0.4, size=pairs)
                if rounded_paired_p_value(moments(d), margin) < level:
                    passed[policy] += 1
                    break
    error = 3 * math.sqrt(alpha * (1 - alpha) / chains)
    assert passed["geometric"] / chains <= alpha + error
    # Without spending, re-running until green passes about a third of such subjects.
    assert passed["none"] / chains > 0.25


# 10.5 The planner names its design


@pytest.mark.parametrize("alternative", ["larger", "two-sided"])
@pytest.mark.parametrize(("baseline", "effect"), [(0.7, 0.05), (0.5, -0.1), (0.9, 0.04)])
def test_planning_one_run_of_pass_rates_is_normal_ind_power_with_ratio_0(
    baseline: float, effect: float, alternative: str
) -> None:
    h = abs(proportion_effectsize(baseline + effect, baseline))
    expected = NormalIndPower().solve_power(
        h, alpha=0.05, power=0.8, ratio=0, alternative=alternative
    )
    planned = plan(
        "pass_rate", baseline, effect, 0.05, 0.8, design="one_sample", alternative=alternative
    )
    assert planned.n == math.ceil(expected)
    two_runs = plan("pass_rate", baseline, effect, 0.05, 0.8, alternative=alternative)
    expected_two = NormalIndPower().solve_power(h, alpha=0.05, power=0.8, alternative=alternative)
    assert two_runs.n == math.ceil(expected_two)
    # One run against a threshold needs about half of what comparing two runs does.
    assert planned.n == pytest.approx(two_runs.n / 2, abs=1)


@pytest.mark.parametrize("alternative", ["larger", "two-sided"])
@pytest.mark.parametrize(("sd", "effect"), [(1.0, 0.2), (0.3, -0.05)])
def test_planning_one_run_of_means_and_paired_runs_is_ttest_power(
    sd: float, effect: float, alternative: str
) -> None:
    expected = TTestPower().solve_power(
        abs(effect) / sd, alpha=0.05, power=0.8, alternative=alternative
    )
    one = plan("mean", sd, effect, 0.05, 0.8, design="one_sample", alternative=alternative)
    # Paired runs of means with the correlation stated as 0.5: the differences' sd is the sd.
    # (Unstated, the third edition assumes 0: tests/aggregation/test_statistics_third_edition.)
    paired = plan("mean", sd, effect, 0.05, 0.8, 0.5, design="paired", alternative=alternative)
    assert one.n == paired.n == math.ceil(expected)
    sd_d = math.sqrt(0.7 * 0.3) * math.sqrt(2 * (1 - 0.5))
    expected = TTestPower().solve_power(0.05 / sd_d, alpha=0.05, power=0.8, alternative=alternative)
    planned = plan("pass_rate", 0.7, 0.05, 0.05, 0.8, 0.5, design="paired", alternative=alternative)
    assert planned.n == math.ceil(expected)


# The worked example, continued (docs/verdicts.md, section 10.7)


def test_worked_a_clustered_comparison_by_hand_and_by_the_oracles() -> None:
    differences = [(1, 0), (0, 0), (1, 1), (0, -1), (1, 0)]
    # d = candidate - baseline on pass (1) / fail (0): 1 is (pass, fail), -1 (fail, pass), and
    # 0 is (pass, pass) on even examples, (fail, fail) on odd ones.
    statuses = {1: ("pass", "fail"), -1: ("fail", "pass")}
    candidate, baseline, tags = [], [], {}
    for g, pair in enumerate(differences):
        for j, d in enumerate(pair):
            i = 2 * g + j
            tags[i] = f"p:{g}"
            ours, theirs = statuses.get(d, ("pass", "pass") if i % 2 == 0 else ("fail", "fail"))
            candidate.append(c(i, ours))
            baseline.append(c(i, theirs))
    body = run_clustered(
        [check(cluster_tag_prefix="p:")],
        candidate,
        tags,
        n=10,
        rule={"rule": "non_inferiority", "margin": 0.1},
        baseline=baseline,
    )
    result = body["checks"][0]
    d = np.array([v for pair in differences for v in pair], dtype=float)
    clusters = np.repeat(np.arange(5), 2)
    # By hand: mean 0.3, CR1 sqrt(6.5)/10, t = 0.4 / CR1, p from t(4).
    assert result["score"] == 0.3
    fitted = statsmodels_fit(d, clusters)
    assert float(fitted.bse[0]) == pytest.approx(math.sqrt(6.5) / 10, abs=1e-12)
    tested = fitted.t_test((np.array([[1.0]]), np.array([-0.1])))
    assert float(tested.tvalue.item()) == pytest.approx(0.4 / (math.sqrt(6.5) / 10), abs=1e-9)
    one_sided = float(tested.pvalue) / 2
    assert result["comparison"]["p_value"] == pytest.approx(one_sided, abs=1e-11)
    assert result["comparison"]["p_value"] == pytest.approx(0.095872, abs=1e-6)
    assert result["status"] == "fail"
    lower, upper = fitted.conf_int(alpha=0.05)[0]
    assert result["interval"]["lower"] == pytest.approx(lower, abs=1e-11)
    assert upper > 1 and result["interval"]["upper"] == 1.0
    # The same pairs unclustered pass: p = 0.046843 (scipy).
    twin = run(
        [check()],
        candidate,
        n=10,
        rule={"rule": "non_inferiority", "margin": 0.1},
        baseline=baseline,
    )
    expected = stats.ttest_1samp(d, -0.1, alternative="greater").pvalue
    assert twin["checks"][0]["comparison"]["p_value"] == pytest.approx(expected, abs=1e-11)
    assert twin["checks"][0]["status"] == "pass"


def test_worked_a_re_evaluated_subject_by_hand_and_by_the_oracles() -> None:
    cases = [c(i, "pass" if i < 90 else "fail") for i in range(100)]
    looks = [
        run(
            [check(threshold=0.8)],
            cases,
            n=100,
            rule={"rule": "interval"},
            look=k,
            spending="geometric",
        )
        for k in (1, 2)
    ]
    for body, alpha_k, hand, result in zip(
        looks,
        (0.04, 0.008),
        ((0.821325, 0.946298), (0.792443, 0.954986)),
        ("pass", "inconclusive"),
        strict=True,
    ):
        interval = body["checks"][0]["interval"]
        oracle = proportion_confint(90, 100, alpha=alpha_k, method="wilson")
        assert (interval["lower"], interval["upper"]) == (
            pytest.approx(oracle[0], abs=1e-11),
            pytest.approx(oracle[1], abs=1e-11),
        )
        assert (interval["lower"], interval["upper"]) == (
            pytest.approx(hand[0], abs=1e-6),
            pytest.approx(hand[1], abs=1e-6),
        )
        assert body["decision_rule"]["alpha_spent"] == alpha_k and body["result"] == result
