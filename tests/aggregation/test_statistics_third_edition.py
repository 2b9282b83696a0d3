"""The third edition of the statistics rules (docs/verdicts.md, section 11): each case the
independent check found, as a test with the verdict it must now give; CV3 against pyfixest,
the hull against statsmodels' Wilson interval; the second edition kept for replay."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pyfixest as pf
import pytest
from scipy import special
from statsmodels.stats.proportion import proportion_confint

from app.aggregation.looks import alpha_spent
from app.aggregation.robust import (
    HULL_METHOD,
    hull_interval,
    jackknife_error,
    robust_interval,
    robust_p_value,
)
from app.aggregation.rounding import moments
from tests.aggregation.test_aggregation_rules import c, check, run
from tests.aggregation.test_statistics import run_clustered


def observed(result: dict[str, Any], slice_name: str | None = None) -> dict[str, Any]:
    """A group's observations by code."""
    return {o["code"]: o for o in result["observations"] if o.get("slice") == slice_name}


def pyfixest_crv3(values: np.ndarray, clusters: np.ndarray) -> tuple[float, float]:
    """pyfixest's estimate and CRV3 standard error of `y ~ 1`, clustered (its defaults)."""
    frame = pd.DataFrame({"y": values, "g": clusters})
    fit = pf.feols("y ~ 1", data=frame, vcov={"CRV3": "g"})
    return float(fit.coef().iloc[0]), float(fit.se().iloc[0])


# 11.1 A clustered pass rate is never more confident than independence


def test_forty_of_forty_in_ten_clusters_is_inconclusive_not_a_point_pass() -> None:
    tags = {i: f"p:{i // 4}" for i in range(40)}
    arguments: dict[str, Any] = {"n": 40, "rule": {"rule": "interval"}}
    checks = [check(cluster_tag_prefix="p:", threshold=0.95)]
    third = run_clustered(checks, [c(i) for i in range(40)], tags, edition=3, **arguments)
    result = third["checks"][0]
    lower, upper = proportion_confint(40, 40, alpha=0.05, method="wilson")
    assert result["interval"]["method"] == HULL_METHOD
    assert result["interval"]["lower"] == pytest.approx(lower, abs=1e-11)
    assert result["interval"]["upper"] == pytest.approx(upper, abs=1e-11)
    assert result["status"] == "inconclusive" and third["decision_rule"]["edition"] == 3
    # The unclustered twin says the same.
    twin = run([check(threshold=0.95)], [c(i) for i in range(40)], edition=3, **arguments)
    assert twin["checks"][0]["status"] == "inconclusive"
    # The second edition, kept for replay, gave the point interval [1, 1] and a pass.
    second = run_clustered(checks, [c(i) for i in range(40)], tags, edition=2, **arguments)
    assert second["checks"][0]["status"] == "pass"
    assert (second["checks"][0]["interval"]["lower"], second["checks"][0]["interval"]["upper"]) == (
        1.0,
        1.0,
    )


@pytest.mark.parametrize("seed", range(8))
def test_the_hull_is_the_t_interval_and_wilson_at_the_effective_size(seed: int) -> None:
    rng = np.random.default_rng(seed)
    groups = int(rng.integers(3, 30))
    sizes = 1 + rng.geometric(1 / 7, size=groups)
    clusters = np.repeat(np.arange(groups), sizes).astype(np.int64)
    chance = rng.beta(2, 1, size=groups)
    values = (rng.random(clusters.size) < chance[clusters]).astype(np.float64)
    sample = moments(values)
    error = jackknife_error(values, clusters, sample)
    assert error is not None
    score = sample.mean
    t_interval = robust_interval(score, error, 0.05, (0.0, 1.0))
    hull = hull_interval(t_interval, error, values.size, score, 0.05)
    effect = (error.clustered / error.independent) ** 2 if error.independent else 1.0
    effective = values.size / max(1.0, effect)
    lower, upper = proportion_confint(score * effective, effective, alpha=0.05, method="wilson")
    assert hull.lower == pytest.approx(min(t_interval.lower, lower), abs=1e-11)
    assert hull.upper == pytest.approx(max(t_interval.upper, upper), abs=1e-11)
    # Never narrower than the examples taken as independent.
    plain_lower, plain_upper = proportion_confint(values.sum(), values.size, 0.05, "wilson")
    assert hull.lower <= plain_lower + 1e-11 and hull.upper >= plain_upper - 1e-11


# 11.2 Small-sample cluster-robust errors: CV3


@pytest.mark.parametrize("seed", range(12))
def test_cv3_is_pyfixests_crv3(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    groups = int(rng.integers(2, 40))
    sizes = 1 + rng.geometric(1 / 7, size=groups)
    clusters = np.repeat(rng.permutation(groups), sizes).astype(np.int64)
    values = rng.normal(rng.normal(size=groups)[clusters], 1.0)
    if seed % 3 == 0:
        values = (values > 0).astype(np.float64)
    error = jackknife_error(values, clusters, moments(values))
    assert error is not None and error.jackknife and error.clusters == groups
    estimate, se = pyfixest_crv3(values, clusters)
    assert moments(values).mean == pytest.approx(estimate, abs=1e-12)
    assert error.clustered == pytest.approx(se, abs=1e-9)
    assert error.se == max(error.clustered, error.independent)


def test_cv3_is_less_optimistic_than_cr1_with_unequal_clusters() -> None:
    rng = np.random.default_rng(7)
    wider = 0
    for _ in range(200):
        sizes = 1 + rng.geometric(1 / 7, size=10)
        clusters = np.repeat(np.arange(10), sizes).astype(np.int64)
        values = rng.normal(rng.normal(size=10)[clusters], 1.0)
        frame = pd.DataFrame({"y": values, "g": clusters})
        cr1 = float(pf.feols("y ~ 1", data=frame, vcov={"CRV1": "g"}).se().iloc[0])
        error = jackknife_error(values, clusters, moments(values))
        assert error is not None
        wider += error.clustered >= cr1 - 1e-12
    assert wider == 200


def test_a_clustered_comparison_uses_cv3_and_says_so() -> None:
    candidate = [c(i, "pass" if i % 5 else "fail") for i in range(30)]
    baseline = [c(i, "pass" if i % 4 else "fail") for i in range(30)]
    tags = {i: f"p:{i % 6}" for i in range(30)}
    body = run_clustered(
        [check(cluster_tag_prefix="p:")],
        candidate,
        tags,
        n=30,
        rule={"rule": "non_inferiority", "margin": 0.1},
        baseline=baseline,
        edition=3,
    )
    comparison = body["checks"][0]["comparison"]
    assert comparison["method"] == "paired_t_cluster_jackknife" and comparison["clusters"] == 6
    differences = np.array([(i % 5 != 0) - (i % 4 != 0) for i in range(30)], dtype=np.float64)
    clusters = np.array([i % 6 for i in range(30)], dtype=np.int64)
    estimate, se = pyfixest_crv3(differences, clusters)
    independent = differences.std(ddof=1) / math.sqrt(30)
    expected = float(special.stdtr(5, -(estimate + 0.1) / max(se, independent)))
    assert comparison["p_value"] == pytest.approx(expected, abs=1e-11)
    error = jackknife_error(differences, clusters, moments(differences))
    assert error is not None
    assert comparison["p_value"] == robust_p_value(body["checks"][0]["score"], error, -0.1)


# 11.3 too_few_clusters after the other steps


def test_a_judge_outage_on_two_of_six_clusters_is_an_error_as_without_clusters() -> None:
    cases = [c(i, "error" if i % 6 in (0, 1) else "pass") for i in range(36)]
    tags = {i: f"p:{i % 6}" for i in range(36)}
    checks = [check(cluster_tag_prefix="p:", threshold=0.5, min_coverage=0.9)]
    third = run_clustered(checks, cases, tags, n=36, edition=3)["checks"][0]
    plain = run([check(threshold=0.5, min_coverage=0.9)], cases, n=36, edition=3)["checks"][0]
    assert plain["status"] == "error"
    assert third["status"] == "error", third["explanation"]
    # The second edition, kept for replay, hid the outage behind too_few_clusters.
    second = run_clustered(checks, cases, tags, n=36, edition=2)["checks"][0]
    assert second["status"] == "inconclusive"
    assert "too_few_clusters" in observed(second)


def test_too_few_clusters_still_decides_when_nothing_else_does() -> None:
    body = run_clustered(
        [check(cluster_tag_prefix="p:", threshold=0.5)],
        [c(i) for i in range(12)],
        {i: f"p:{i % 3}" for i in range(12)},
        n=12,
        edition=3,
    )
    assert body["checks"][0]["status"] == "inconclusive"
    assert body["reasons"][0]["step"] == "too_few_clusters"


# 11.4 The MDE divides alpha by m only in a corrected family


@pytest.mark.parametrize(("correction", "divisor"), [("none", 1), ("bonferroni", 2)])
def test_the_mde_divides_alpha_only_in_a_corrected_family(correction: str, divisor: int) -> None:
    candidate = [c(i, "pass" if i % 3 else "fail", check_id=k) for k in "ab" for i in range(40)]
    baseline = [c(i, "pass" if i % 4 else "fail", check_id=k) for k in "ab" for i in range(40)]
    rule = {
        "rule": "non_inferiority",
        "margin": 0.05,
        "correction": correction,
        "family": ["a", "b"],
    }
    checks = [check("a"), check("b")]
    body = run(checks, candidate, n=40, rule=rule, baseline=baseline, edition=3)
    power = observed(body["checks"][0])["mde"]["detail"]
    z_level = float(special.ndtri(1 - 0.05 / divisor))
    assert power["critical"] == pytest.approx(z_level, abs=1e-11)
    # The second edition divided under `none` too.
    second = run(checks, candidate, n=40, rule=rule, baseline=baseline, edition=2)
    critical = observed(second["checks"][0])["mde"]["detail"]["critical"]
    assert critical == pytest.approx(float(special.ndtri(1 - 0.05 / 2)), abs=1e-11)


# 11.5 Spending: the MDE at the next look's alpha


def test_under_spending_the_mde_is_at_the_next_looks_alpha() -> None:
    cases = [c(i, "pass" if i < 85 else "fail") for i in range(100)]
    checks = [check(method="mean", threshold=0.8)]
    body = run(
        checks, cases, n=100, rule={"rule": "interval"}, look=2, spending="geometric", edition=3
    )
    rule = body["decision_rule"]
    assert (rule["look"], rule["alpha_spent"], rule["alpha_next"]) == (
        2,
        alpha_spent(0.05, 2),
        alpha_spent(0.05, 3),
    )
    assert body["checks"][0]["interval"]["level"] == 1 - alpha_spent(0.05, 2)
    power = observed(body["checks"][0])["mde"]["detail"]
    assert power["alpha"] == alpha_spent(0.05, 3)
    assert power["critical"] == pytest.approx(
        float(special.ndtri(1 - alpha_spent(0.05, 3) / 2)), abs=1e-11
    )


# The seeded coverage simulation of section 11


def _draw(
    rng: np.random.Generator, groups: int, icc: float, rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """Pass/fail values in `groups` clusters of 1 + Geometric(1/7) examples whose pass chances
    are Beta with mean `rate` and intra-cluster correlation `icc`."""
    a, b = rate * (1 - icc) / icc, (1 - rate) * (1 - icc) / icc
    sizes = 1 + rng.geometric(1 / 7, size=groups)
    clusters = np.repeat(np.arange(groups), sizes).astype(np.int64)
    values = (rng.random(clusters.size) < rng.beta(a, b, size=groups)[clusters]).astype(float)
    return values, clusters


def coverage_table(runs: int = 1000) -> dict[tuple[float, float, int], tuple[float, int]]:
    """Per (icc, rate, G): the share of 95 % hull intervals holding the true rate, and how many
    were narrower than the unclustered Wilson interval."""
    rng = np.random.default_rng(20261204)
    table: dict[tuple[float, float, int], tuple[float, int]] = {}
    for icc in (0.1, 0.5):
        for rate in (0.7, 0.95):
            for groups in (5, 10, 20, 50):
                covered = narrower = 0
                for _ in range(runs):
                    values, clusters = _draw(rng, groups, icc, rate)
                    sample = moments(values)
                    error = jackknife_error(values, clusters, sample)
                    assert error is not None
                    t_interval = robust_interval(sample.mean, error, 0.05, (0.0, 1.0))
                    hull = hull_interval(t_interval, error, values.size, sample.mean, 0.05)
                    covered += hull.lower <= rate <= hull.upper
                    plain = proportion_confint(values.sum(), values.size, 0.05, "wilson")
                    narrower += hull.lower > plain[0] + 1e-11 or hull.upper < plain[1] - 1e-11
                table[(icc, rate, groups)] = (covered / runs, narrower)
    return table


def test_the_coverage_simulation() -> None:
    table = coverage_table()
    print("\nICC  rate  G=5    G=10   G=20   G=50   (95 % hull, 1,000 runs a cell)")
    for icc in (0.1, 0.5):
        for rate in (0.7, 0.95):
            cells = "  ".join(f"{table[(icc, rate, g)][0]:.3f}" for g in (5, 10, 20, 50))
            print(f"{icc:<4} {rate:<5} {cells}")
    assert all(narrower == 0 for _, narrower in table.values())
    for rate in (0.7, 0.95):
        for groups in (5, 10, 20, 50):
            assert table[(0.1, rate, groups)][0] >= 0.93, (rate, groups)
    for groups in (10, 20, 50):
        assert table[(0.5, 0.7, groups)][0] >= 0.90, groups


def test_cv3_passes_a_comparison_at_the_margin_no_more_often_than_cr1() -> None:
    from app.aggregation.robust import robust_error

    rng = np.random.default_rng(20261205)
    margin, runs = 0.05, 2000
    passed = {"cv3": 0, "cr1": 0}
    for groups in (5, 10, 20, 50):
        for _ in range(runs // 4):
            sizes = 1 + rng.geometric(1 / 7, size=groups)
            clusters = np.repeat(np.arange(groups), sizes).astype(np.int64)
            effects = rng.normal(0, math.sqrt(0.5), size=groups)[clusters]
            differences = -margin + effects + rng.normal(0, math.sqrt(0.5), size=clusters.size)
            sample = moments(differences)
            for name, error in (
                ("cv3", jackknife_error(differences, clusters, sample)),
                ("cr1", robust_error(differences, clusters, sample)),
            ):
                assert error is not None
                passed[name] += robust_p_value(sample.mean, error, -margin) < 0.05
    print(
        f"\nfalse passes at the margin: CV3 {passed['cv3'] / runs:.3f}, CR1 {passed['cr1'] / runs:.3f}"
    )
    assert passed["cv3"] <= passed["cr1"]


# 11.6 The paired planner states its correlation


def test_the_paired_planner_assumes_no_correlation_unless_told_and_says_so() -> None:
    from statsmodels.stats.power import TTestPower

    from app.aggregation.power import plan

    unstated = plan("pass_rate", 0.7, 0.05, 0.05, 0.8, design="paired")
    sd = math.sqrt(0.7 * 0.3)
    expected = TTestPower().solve_power(
        0.05 / (sd * math.sqrt(2)), alpha=0.05, power=0.8, alternative="larger"
    )
    assert (unstated.n, unstated.correlation) == (math.ceil(expected), 0.0) == (1041, 0.0)
    stated = plan("pass_rate", 0.7, 0.05, 0.05, 0.8, 0.5, design="paired")
    assert (stated.n, stated.correlation) == (521, 0.5)
    assert plan("pass_rate", 0.7, 0.05, 0.05, 0.8).correlation is None


# 11.7 Display


def test_no_design_effect_when_the_clustered_variance_is_rounding_noise() -> None:
    # Every cluster holds one pass and one fail: its mean is the overall mean, so the clustered
    # variance is 0 but for float noise.
    cases = [c(i, "pass" if i % 2 else "fail") for i in range(20)]
    tags = {i: f"p:{i // 2}" for i in range(20)}
    checks = [check(cluster_tag_prefix="p:", threshold=0.3)]
    third = run_clustered(checks, cases, tags, n=20, edition=3)["checks"][0]
    assert "design_effect" not in observed(third) and observed(third)["clusters"]["count"] == 10


def test_the_worked_clustered_pass_rate_near_1() -> None:
    """docs/verdicts.md, section 11.9, by the engine and by the oracles."""
    cases = [c(i, "fail" if i < 2 else "pass") for i in range(40)]
    tags = {i: f"p:{i // 4}" for i in range(40)}
    body = run_clustered(
        [check(cluster_tag_prefix="p:", threshold=0.9)],
        cases,
        tags,
        n=40,
        rule={"rule": "interval"},
        edition=3,
    )
    result = body["checks"][0]
    values = np.array([0.0, 0.0] + [1.0] * 38)
    clusters = np.repeat(np.arange(10), 4)
    _, se = pyfixest_crv3(values, clusters)
    assert se == pytest.approx(1 / 18, abs=1e-12)
    effect = observed(result)["design_effect"]["detail"]
    independent = math.sqrt(0.95 * 0.05 / 39)
    assert effect == pytest.approx((se / independent) ** 2, abs=1e-11)
    assert round(effect, 3) == 2.534
    effective = 40 / effect
    wilson_lower, _ = proportion_confint(0.95 * effective, effective, 0.05, "wilson")
    t_lower = 0.95 - float(special.stdtrit(9, 0.975)) * se
    assert round(t_lower, 4) == 0.8243 and round(wilson_lower, 4) == 0.7313
    assert result["interval"]["lower"] == pytest.approx(min(t_lower, wilson_lower), abs=1e-11)
    assert result["interval"]["upper"] == 1.0
    assert result["status"] == "inconclusive"
    plain = proportion_confint(38, 40, 0.05, "wilson")
    assert [round(v, 4) for v in plain] == [0.8350, 0.9862]
