"""Properties of the engine (hypothesis): order, optional checks, failures, correction, bytes."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.digest.canonical import canonical_bytes
from tests.aggregation.test_aggregation_rules import c, check, run

STATUS = st.sampled_from(["pass", "pass", "pass", "fail", "error", "timeout", "skipped", "pending"])
N = 12


def suite(threshold: float) -> list[dict[str, Any]]:
    return [
        check(
            "acc",
            threshold=threshold,
            min_coverage=0.7,
            slices=[{"name": "de", "tag": "de", "required": True}],
        ),
        check("avg", method="mean", threshold=threshold, scorer="r", repeats=2, min_coverage=0.5),
    ]


@st.composite
def evaluations(draw: st.DrawFn) -> tuple[list[dict[str, Any]], float, str]:
    cases: list[dict[str, Any]] = []
    for i in range(N):
        status = draw(STATUS)
        if status != "pending":
            cases.append(c(i, status, check_id="acc"))
        for repeat in range(2):
            status = draw(STATUS)
            if status != "pending":
                cases.append(
                    c(
                        i,
                        status,
                        repeat,
                        check_id="avg",
                        score=draw(st.floats(0, 1, allow_nan=False)),
                    )
                )
    return (
        cases,
        draw(st.sampled_from([0.3, 0.5, 0.8])),
        draw(st.sampled_from(["threshold", "interval"])),
    )


@settings(max_examples=60, deadline=None)
@given(evaluations(), st.randoms(use_true_random=False))
def test_case_order_changes_nothing(evaluation, rng: random.Random) -> None:
    cases, threshold, rule = evaluation
    shuffled = list(cases)
    rng.shuffle(shuffled)
    first = run(suite(threshold), cases, n=N, rule={"rule": rule})
    assert canonical_bytes(first) == canonical_bytes(
        run(suite(threshold), shuffled, n=N, rule={"rule": rule})
    )
    assert canonical_bytes(first) == canonical_bytes(
        run(suite(threshold), cases, n=N, rule={"rule": rule})
    )


@settings(max_examples=60, deadline=None)
@given(evaluations(), st.lists(STATUS, min_size=N, max_size=N))
def test_an_optional_check_never_changes_the_result(
    evaluation, optional_statuses: list[str]
) -> None:
    cases, threshold, rule = evaluation
    before = run(suite(threshold), cases, n=N, rule={"rule": rule})
    extra = [c(i, s, check_id="opt") for i, s in enumerate(optional_statuses) if s != "pending"]
    after = run(
        [*suite(threshold), check("opt", required=False)], cases + extra, n=N, rule={"rule": rule}
    )
    for key in ("result", "reasons", "coverage", "evidence_complete", "assurance"):
        assert before[key] == after[key]


@settings(max_examples=60, deadline=None)
@given(evaluations(), st.data())
def test_more_failures_never_turn_fail_into_pass(evaluation, data: st.DataObject) -> None:
    cases, threshold, rule = evaluation
    before = run(suite(threshold), cases, n=N, rule={"rule": rule})
    passing = [i for i, case in enumerate(cases) if case["status"] == "pass"]
    if not passing:
        return
    flips = data.draw(st.lists(st.sampled_from(passing), min_size=1, unique=True))
    worse = [dict(case, status="fail") if i in flips else case for i, case in enumerate(cases)]
    after = run(suite(threshold), worse, n=N, rule={"rule": rule})
    if before["result"] == "fail":
        assert after["result"] != "pass"
    if before["result"] != "pass":
        assert after["result"] != "pass"


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["holm", "bonferroni"]), st.floats(-0.1, 0.2))
def test_a_comparison_that_passes_after_correction_passes_before(
    seed: int, correction: str, shift: float
) -> None:
    from tests.aggregation.test_aggregation_rules import comparative_cases, comparative_suite

    checks, rule = comparative_suite(correction=correction)
    candidate, baseline = comparative_cases(shift, seed=seed)
    corrected = run(checks, candidate, n=40, rule=rule, baseline=baseline)
    uncorrected = run(
        checks, candidate, n=40, rule={**rule, "correction": "none"}, baseline=baseline
    )
    for after, before in zip(corrected["checks"], uncorrected["checks"], strict=True):
        pairs = [(after, before), *zip(after["slices"], before["slices"], strict=True)]
        for a, b in pairs:
            if a["comparison"] is None:
                continue
            assert a["comparison"]["p_adjusted"] >= a["comparison"]["p_value"]
            if a["status"] == "pass":
                assert b["status"] == "pass"


def test_the_engine_imports_no_web_database_or_storage_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, app.aggregation.engine\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('fastapi', 'sqlalchemy', 'aiobotocore',"
        " 'asyncpg', 'starlette')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
