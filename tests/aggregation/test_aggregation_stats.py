"""Interval and comparison statistics against statsmodels and scipy as oracles."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from app.aggregation.stats import adjust, bootstrap, bootstrap_seed, paired_p_value, wilson


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.5]),
)
def test_wilson_matches_statsmodels(kn: tuple[int, int], alpha: float) -> None:
    k, n = kn
    interval = wilson(k, n, alpha)
    lower, upper = proportion_confint(k, n, alpha=alpha, method="wilson")
    assert interval.lower == pytest.approx(lower, abs=1e-12)
    assert interval.upper == pytest.approx(upper, abs=1e-12)
    assert interval.method == "wilson" and interval.level == round(1 - alpha, 12)


def test_worked_example_wilson() -> None:
    interval = wilson(10, 12, 0.05)
    assert interval.lower == pytest.approx(0.5519691377470265, abs=1e-12)
    assert interval.upper == pytest.approx(0.9530348578161462, abs=1e-12)


def test_seed_is_the_first_six_bytes() -> None:
    assert bootstrap_seed("00000000-0000-4000-8000-000000000001", "helpfulness") == 135437642607158


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(1).binomial(1, 0.8, 3000).astype(float),
        np.random.default_rng(2).binomial(5, 0.6, 3000) / 5.0,
        np.random.default_rng(3).beta(2, 3, 3000),
    ],
    ids=["pass-fail", "repeats", "continuous"],
)
def test_bootstrap_within_sampling_error_of_scipy(values: np.ndarray) -> None:
    ours = bootstrap(values, 0.05, seed=12345)
    theirs = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=2000,
        method="percentile",
        confidence_level=0.95,
        random_state=np.random.default_rng(7),
    )
    spread = values.std() / np.sqrt(values.size)
    assert ours.lower == pytest.approx(theirs.confidence_interval.low, abs=0.5 * spread)
    assert ours.upper == pytest.approx(theirs.confidence_interval.high, abs=0.5 * spread)
    assert ours.resamples == 2000 and ours.seed == 12345
    again = bootstrap(values, 0.05, seed=12345)
    assert (again.lower, again.upper) == (ours.lower, ours.upper)


def test_bootstrap_names_its_way() -> None:
    assert (
        bootstrap(np.array([0.0, 1.0, 1.0]), 0.05, 1).method == "bootstrap_percentile/pcg64/counts"
    )
    continuous = np.random.default_rng(4).random(1000)
    assert bootstrap(continuous, 0.05, 1).method == "bootstrap_percentile/pcg64x8/indices"


def test_bootstrap_degenerate() -> None:
    interval = bootstrap(np.ones(50), 0.05, 9)
    assert (interval.lower, interval.upper) == (1.0, 1.0)
    single = bootstrap(np.array([0.3]), 0.05, 9)
    assert (single.lower, single.upper) == (0.3, 0.3)


@settings(max_examples=200, deadline=None)
@given(
    # Differences of scores, to 12 decimals: a list like [0, 0, 8.7e-161] squares into the
    # subnormal range, where any two variance formulas part ways (found by Hypothesis).
    st.lists(
        st.floats(-1, 1, allow_nan=False).map(lambda x: round(x, 12)), min_size=2, max_size=60
    ),
    st.sampled_from([-0.05, 0.0, 0.02]),
)
def test_paired_p_matches_scipy(d: list[float], delta0: float) -> None:
    array = np.array(d)
    ours = paired_p_value(array, delta0)
    if np.all(array == array[0]):
        assert ours == (0.0 if array[0] > delta0 else 1.0)
        return
    theirs = stats.ttest_1samp(array - delta0, 0.0, alternative="greater").pvalue
    if np.isnan(theirs):
        return
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


def test_paired_p_edges() -> None:
    assert paired_p_value(np.array([0.5]), 0.0) == 1.0
    assert paired_p_value(np.array([]), 0.0) == 1.0
    assert paired_p_value(np.array([0.1, 0.1]), 0.0) == 0.0
    assert paired_p_value(np.array([0.0, 0.0]), 0.0) == 1.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=20))
def test_corrections_match_statsmodels(p: list[float]) -> None:
    for ours, theirs in (("holm", "holm"), ("bonferroni", "bonferroni")):
        expected = multipletests(p, method=theirs)[1]
        assert adjust(p, ours) == pytest.approx(list(expected), abs=1e-12)
    assert adjust(p, "none") == p
    assert all(a >= r for a, r in zip(adjust(p, "holm"), p, strict=True))
