"""Measures decided like scores (docs/verdicts.md, section 12): quantile checks against scipy
and numpy, lower-is-better rules, relative margins against a plain bootstrap loop, and the
coverage of the order-statistic interval."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from app.aggregation.engine import aggregate
from app.aggregation.inputs import InvalidInput
from app.aggregation.measures import (
    log_ratio_test,
    minimum_n,
    quantile_interval,
    quantile_score,
)
from app.aggregation.stats import RESAMPLES, bootstrap_seed
from tests.aggregation_helpers import EVALUATION_ID, build_input, freeze

SCORER = {"name": "judge", "version": "1", "definition": {"kind": "exact"}}


def _dataset(n: int) -> dict[str, Any]:
    return {
        "name": "prompts",
        "version": "1",
        "examples": [
            {"id": f"e{i:05d}", "body": {"i": i}, "tags": ["odd" if i % 2 else "even"]}
            for i in range(n)
        ],
    }


def _suite(*measure_checks: dict[str, Any], rule: str = "threshold", repeats: int = 1) -> dict:
    return {
        "decision_rule": {"rule": rule, "alpha": 0.05, "margin": 0.05},
        "checks": [
            {
                "check_id": "accuracy",
                "scorer": {"name": "judge", "version": "1"},
                "dataset": {"name": "prompts", "version": "1"},
                "repeats": repeats,
                "aggregation": {"method": "pass_rate", "threshold": 0.0},
            },
            *measure_checks,
        ],
    }


def _latency(q: float, threshold: float, better: str = "lower", **extra: Any) -> dict:
    return {
        "check_id": "latency",
        "measure": {"of": "accuracy", "name": "latency_ms"},
        "aggregation": {
            "method": "quantile",
            "q": q,
            "threshold": threshold,
            "better": better,
            **extra,
        },
    }


def _cases(values: list[float | None], repeat: int = 0, name: str = "latency_ms") -> list[dict]:
    cases = []
    for i, value in enumerate(values):
        case: dict[str, Any] = {
            "check_id": "accuracy",
            "example_id": f"e{i:05d}",
            "repeat": repeat,
            "status": "pass",
            "output": {"i": i},
        }
        if value is not None:
            case["measures"] = {name: value, "output_tokens": 10}
        cases.append(case)
    return cases


def _run(suite: dict, values: list[float | None], **kwargs: Any) -> dict[str, Any]:
    dataset = _dataset(len(values))
    content = freeze(suite, dataset, [SCORER])
    inp = build_input(content, dataset, [SCORER], _cases(values), edition=3, **kwargs)
    return aggregate(inp).body


def _check(body: dict, check_id: str = "latency") -> dict[str, Any]:
    return next(c for c in body["checks"] if c["check_id"] == check_id)


LATENCIES = [float(v) for v in np.random.default_rng(7).lognormal(6.5, 0.4, 400).round(1)]


def test_quantile_score_and_interval_are_numpy_and_scipy() -> None:
    values = np.array(LATENCIES)
    for q in (0.5, 0.9, 0.95, 0.99):
        score = quantile_score(values, q)
        assert score == np.quantile(values, q, method="inverted_cdf")
        oracle = stats.quantile_test(values, q=score, p=q).confidence_interval(0.95)
        found = quantile_interval(values, q, 0.05)
        assert found.lower == pytest.approx(oracle.low, abs=1e-12)
        assert found.upper == pytest.approx(oracle.high, abs=1e-12)


def test_a_missing_end_is_none_where_scipy_gives_nan() -> None:
    values = np.array(LATENCIES[:15])
    oracle = stats.quantile_test(values, q=quantile_score(values, 0.95), p=0.95)
    interval = oracle.confidence_interval(0.95)
    found = quantile_interval(values, 0.95, 0.05)
    assert math.isnan(interval.high) and found.upper is None
    assert found.lower == pytest.approx(interval.low, abs=1e-12)


def test_minimum_n_is_the_first_n_with_both_ends() -> None:
    for q in (0.5, 0.9, 0.95, 0.99):
        for alpha in (0.01, 0.05, 0.1):
            first = next(
                n
                for n in range(1, 5000)
                if not any(
                    math.isnan(end)
                    for end in stats.quantile_test(
                        np.arange(float(n)), q=0.0, p=q
                    ).confidence_interval(1 - alpha)
                )
            )
            assert minimum_n(q, alpha) == first, (q, alpha)


def test_p95_latency_under_and_over_its_bar() -> None:
    p95 = float(np.quantile(LATENCIES, 0.95, method="inverted_cdf"))
    under = _check(_run(_suite(_latency(0.95, p95 + 1)), LATENCIES))
    over = _check(_run(_suite(_latency(0.95, p95 - 1)), LATENCIES))
    assert under["status"] == "pass" and under["score"] == p95
    assert over["status"] == "fail"
    assert "lower is better" in over["explanation"]
    assert under["interval"]["method"] == "order_statistic"
    assert under["measure"] == {"of": "accuracy", "name": "latency_ms"}
    assert under["scorer_ref"]["name"] == "judge"
    # The measure check's cases are its source's, bound by the same tree.
    assert under["cases"] == _check(_run(_suite(_latency(0.95, 1)), LATENCIES), "accuracy")["cases"]


def test_the_interval_rule_mirrors_under_lower() -> None:
    values = np.array(LATENCIES)
    found = quantile_interval(values, 0.95, 0.05)
    assert found.lower is not None and found.upper is not None
    suite = _suite(_latency(0.95, found.upper + 1), rule="interval")
    assert _check(_run(suite, LATENCIES))["status"] == "pass"
    suite = _suite(_latency(0.95, found.lower - 1), rule="interval")
    assert _check(_run(suite, LATENCIES))["status"] == "fail"
    suite = _suite(_latency(0.95, (found.lower + found.upper) / 2), rule="interval")
    check = _check(_run(suite, LATENCIES))
    assert (check["status"], check["explanation"].split(":")[0]) == ("inconclusive", "Inconclusive")


def test_fifteen_examples_cannot_decide_a_p95_by_its_interval() -> None:
    suite = _suite(_latency(0.95, 10_000.0), rule="interval")
    body = _run(suite, LATENCIES[:15])
    check = _check(body)
    assert check["status"] == "inconclusive"
    assert check["interval"]["upper"] is None
    reason = next(r for r in body["reasons"] if r.get("check_id") == "latency")
    assert reason["step"] == "too_few_samples_for_quantile"
    assert f"from {minimum_n(0.95, 0.05)} examples, and 15 executed" in check["explanation"]
    # The threshold rule needs no interval end.
    assert _check(_run(_suite(_latency(0.95, 10_000.0)), LATENCIES[:15]))["status"] == "pass"


def test_a_missing_measure_makes_the_report_inconclusive_not_pass() -> None:
    values: list[float | None] = list(LATENCIES[:50])
    values[3] = None
    body = _run(_suite(_latency(0.5, 10_000.0)), values)
    check = _check(body)
    assert check["status"] == "inconclusive" and body["result"] == "inconclusive"
    assert {"code": "measure_missing", "check_id": "latency", "missing": 1} in body["reasons"]
    assert {"code": "unexecuted_measure_missing", "count": 1} in check["observations"]
    assert check["coverage"] == {"expected": 50, "executed": 49, "missing": 1}


def test_a_measure_missing_on_one_repeat_leaves_its_example_unexecuted() -> None:
    dataset = _dataset(20)
    content = freeze(_suite(_latency(0.5, 10_000.0), repeats=2), dataset, [SCORER])
    cases = _cases(LATENCIES[:20], repeat=0) + _cases([*LATENCIES[20:39], None], repeat=1)
    body = aggregate(build_input(content, dataset, [SCORER], cases, edition=3)).body
    assert _check(body)["coverage"]["missing"] == 1
    assert _check(body, "accuracy")["status"] == "pass"


def test_an_example_value_is_the_mean_over_its_repeats() -> None:
    dataset = _dataset(30)
    suite = _suite(
        {**_latency(0.5, 1.0), "aggregation": {"method": "mean", "threshold": 1.0}}, repeats=2
    )
    content = freeze(suite, dataset, [SCORER])
    first, second = LATENCIES[:30], LATENCIES[30:60]
    cases = _cases(first, repeat=0) + _cases(second, repeat=1)
    body = aggregate(build_input(content, dataset, [SCORER], cases, edition=3)).body
    expected = np.mean((np.array(first) + np.array(second)) / 2)
    assert _check(body)["score"] == pytest.approx(expected, rel=1e-12)


def test_better_lower_on_an_ordinary_mean_check() -> None:
    dataset = _dataset(40)
    suite = {
        "checks": [
            {
                "check_id": "distance",
                "scorer": {"name": "judge", "version": "1"},
                "dataset": {"name": "prompts", "version": "1"},
                "aggregation": {"method": "mean", "threshold": 0.3, "better": "lower"},
            }
        ]
    }
    content = freeze(suite, dataset, [SCORER])

    def run(score: float) -> str:
        cases = [
            {"check_id": "distance", "example_id": f"e{i:05d}", "repeat": 0, "status": "pass"}
            | {"score": score, "output": {"i": i}}
            for i in range(40)
        ]
        check = aggregate(build_input(content, dataset, [SCORER], cases, edition=3)).body
        return str(check["checks"][0]["status"])

    assert (run(0.2), run(0.3), run(0.4)) == ("pass", "pass", "fail")


def _paired(ratio: float, n: int = 300) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(11)
    baseline = rng.lognormal(0.0, 0.3, n) * 0.002
    candidate = baseline * ratio * rng.lognormal(0.0, 0.05, n)
    return [float(v) for v in candidate], [float(v) for v in baseline]


def _cost_suite(margin_relative: float, rule: str = "non_inferiority") -> dict:
    cost = {
        "check_id": "cost",
        "measure": {"of": "accuracy", "name": "cost_usd"},
        "aggregation": {
            "method": "mean",
            "threshold": 0.0,
            "better": "lower",
            "margin_relative": margin_relative,
        },
    }
    return _suite(cost, rule=rule)


def _compare_costs(candidate: list[float], baseline: list[float], suite: dict) -> dict:
    dataset = _dataset(len(candidate))
    content = freeze(suite, dataset, [SCORER])
    inp = build_input(
        content,
        dataset,
        [SCORER],
        _cases(candidate, name="cost_usd"),
        baseline=_cases(baseline, name="cost_usd"),
        edition=3,
    )
    return _check(aggregate(inp).body, "cost")


def test_cost_twenty_percent_up_passes_a_thirty_percent_relative_margin() -> None:
    check = _compare_costs(*_paired(1.20), _cost_suite(0.3))
    assert check["status"] == "pass"
    assert check["comparison"]["method"] == "paired_bootstrap_log_ratio"
    assert check["comparison"]["delta0"] == pytest.approx(-math.log(1.3), abs=1e-12)
    assert check["score"] == pytest.approx(-math.log(1.2), abs=0.02)


def test_cost_forty_five_percent_up_fails_it() -> None:
    check = _compare_costs(*_paired(1.45), _cost_suite(0.3))
    assert check["status"] == "fail"


def test_a_ratio_of_a_zero_mean_is_undefined() -> None:
    candidate, baseline = _paired(1.0, 50)
    check = _compare_costs(candidate, [0.0] * 50, _cost_suite(0.3))
    assert check["status"] == "inconclusive"
    assert "ratio_undefined" in check["explanation"]
    assert baseline


def test_log_ratio_bootstrap_against_a_plain_loop() -> None:
    candidate, baseline = (np.array(v) for v in _paired(1.2, 97))
    seed = bootstrap_seed(EVALUATION_ID, "cost")
    found = log_ratio_test(
        candidate,
        baseline,
        lower_is_better=True,
        margin_relative=0.3,
        bar_sign=-1.0,
        alpha=0.05,
        seed=seed,
    )
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = []
    for _ in range(RESAMPLES):
        index = rng.integers(0, 97, size=97, dtype=np.int64)
        draws.append(math.log(baseline[index].sum() / candidate[index].sum()))
    bar = -math.log(1.3)
    assert found.p_value == sum(1 for d in draws if d <= bar) / RESAMPLES
    assert found.lower == pytest.approx(np.percentile(draws, 2.5), abs=1e-12)
    assert found.upper == pytest.approx(np.percentile(draws, 97.5), abs=1e-12)
    assert found.statistic == pytest.approx(math.log(baseline.mean() / candidate.mean()), 1e-12)


def test_a_mean_measure_compares_the_mirrored_difference() -> None:
    candidate, baseline = _paired(0.8)
    suite = _cost_suite(0.3)
    del suite["checks"][1]["aggregation"]["margin_relative"]
    suite["decision_rule"]["margin"] = 0.0
    suite["decision_rule"]["rule"] = "superiority"
    check = _compare_costs(candidate, baseline, suite)
    assert check["comparison"]["method"] == "paired_t"
    assert check["score"] == pytest.approx(np.mean(np.array(baseline) - candidate), rel=1e-9)
    assert check["status"] == "pass"


def test_quantile_checks_keep_their_thresholds_under_comparative_rules() -> None:
    suite = _suite(_latency(0.95, 1e9), rule="non_inferiority")
    check = _check(_run(suite, LATENCIES))
    assert check["comparison"] is None and check["status"] == "pass"


def test_a_measure_check_of_a_missing_check_is_invalid_input() -> None:
    dataset = _dataset(10)
    content = freeze(_suite(_latency(0.5, 1.0)), dataset, [SCORER])
    content["checks"][1]["measure"]["of"] = "nothing"
    with pytest.raises(InvalidInput, match="no scored check"):
        aggregate(build_input(content, dataset, [SCORER], _cases(LATENCIES[:10]), edition=3))


def test_order_statistic_coverage_of_the_p95_on_lognormal_latencies() -> None:
    """Seeded simulation (docs/verdicts.md, section 12): 1,000 runs at each n; the interval
    holds the true p95 at least as often as its level says."""
    rng = np.random.default_rng(20261205)
    true_p95 = math.exp(6.5 + 0.4 * stats.norm.ppf(0.95))
    found = {}
    for n in (100, 400, 2000):
        held = 0
        for _ in range(1000):
            interval = quantile_interval(rng.lognormal(6.5, 0.4, n), 0.95, 0.05)
            assert interval.lower is not None and interval.upper is not None
            held += interval.lower <= true_p95 <= interval.upper
        found[n] = held / 1000
    print("order-statistic coverage of the p95 (nominal 0.95):", found)
    # 1,000 runs: a standard error of 0.007; the interval is conservative by construction.
    assert all(coverage >= 0.95 - 0.014 for coverage in found.values()), found
