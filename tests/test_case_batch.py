"""The column-wise ingestion lane (app/services/case_batch.py) against the case-by-case
validator: it accepts only batches the careful path accepts, with the very same rows, long
outputs and leaves, and it does take the common shape (else it would be no lane at all)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import ProblemError
from app.merkle import case_leaf
from app.services.case_batch import fast_rows
from app.services.case_rows import CaseValidator, ScorerInfo
from app.services.compiled import CompiledCheck, CompiledSuite

EXAMPLES = ["a", "b", 'q"uote', "ü-nicode", "tab\there", "z"]
POSITIONS = {example: rank for rank, example in enumerate(sorted(EXAMPLES))}
JUDGE = "sha256:" + "a" * 64
GRADER = "sha256:" + "b" * 64
GRADER_2 = "sha256:" + "c" * 64


# A check over another dataset version: batches mixing it with the others look positions up
# per case.
OTHER_POSITIONS = {"a": 0, "zz": 1}


def _check(
    check_id: str, method: str, repeats: int, scorer: str, positions: dict[str, int] = POSITIONS
) -> CompiledCheck:
    return CompiledCheck(check_id, method, repeats, scorer, "1", JUDGE, uuid.uuid4(), positions)


SUITE = CompiledSuite(
    uuid.uuid4(),
    {},
    {
        "pass": _check("pass", "pass_rate", 3, "judge"),
        "mean": _check("mean", "mean", 2, "grader"),
        "other": _check("other", "pass_rate", 1, "judge", OTHER_POSITIONS),
    },
)
SCORERS = {
    ("judge", "1"): ScorerInfo(JUDGE, None, None),
    ("grader", "1"): ScorerInfo(GRADER, 0.0, 1.0),
    ("grader", "2"): ScorerInfo(GRADER_2, 0.0, 1.0),
}


def validator(cap: str = "platform_verified", inline_limit: int = 4096) -> CaseValidator:
    """A validator of the two-check suite (no database: the suite is compiled by hand)."""
    return CaseValidator(
        evaluation_id=uuid.UUID(int=7),
        suite=SUITE,
        scorers=SCORERS,
        assurance_cap=cap,
        store=None,  # type: ignore[arg-type]  # nothing is uploaded: outputs stay inline
        object_prefix="outputs/o/p",
        inline_limit=inline_limit,
        ndjson=True,
    )


def careful(v: CaseValidator, cases: list[Any]) -> tuple[list[Any], list[Any]] | None:
    """The case-by-case answer: (rows, long outputs), or None when any case is refused."""
    try:
        rows = [v.row(index, case) for index, case in enumerate(cases)]
    except ProblemError:
        return None
    if v.pending_uploads:
        return None
    return rows, v.outputs


outputs = st.one_of(
    st.none(),
    st.fixed_dictionaries({"answer": st.text(max_size=150)}),
    st.text(max_size=3),
    st.lists(st.integers(min_value=-5, max_value=5) | st.floats(-2, 2), max_size=3),
    st.just({"k": 1.5, "a": [True, None]}),
)
cases = st.fixed_dictionaries(
    {
        "check_id": st.sampled_from(["pass", "mean", "other"]),
        "example_id": st.sampled_from([*EXAMPLES, "zz"]),
        "repeat": st.sampled_from([0, 1, 2]),
        "status": st.sampled_from(["pass", "fail", "error", "skipped"]),
    },
    optional={
        "score": st.none() | st.sampled_from([0, 1, 0.25, 0.5, 1.5, -0.1]),
        "output": outputs,
        "assurance": st.sampled_from(["reported", "platform_verified", "attested_isolated"]),
        "scorer_version": st.sampled_from(["1", "2"]) | st.none(),
        "evidence_refs": st.none(),
        "trace_ref": st.none(),
    },
)
# Rarer departures from the common shape, each one the careful path refuses or treats apart.
odd_cases = st.one_of(
    cases,
    cases.map(lambda c: {**c, "repeat": float(c["repeat"])}),
    cases.map(lambda c: {**c, "repeat": True}),
    cases.map(lambda c: {**c, "example_id": "unknown"}),
    cases.map(lambda c: {**c, "check_id": "nope"}),
    cases.map(lambda c: {**c, "status": "passed"}),
    cases.map(lambda c: {**c, "output_digest": JUDGE}),
    cases.map(lambda c: {**c, "evidence_refs": [JUDGE]}),
    cases.map(lambda c: {**c, "extra": 1}),
    st.just(["not", "an", "object"]),
)


@settings(max_examples=600, deadline=None)
@given(
    st.lists(odd_cases, min_size=1, max_size=6), st.sampled_from(["reported", "platform_verified"])
)
def test_the_lane_accepts_only_what_the_careful_path_accepts(batch: list[Any], cap: str) -> None:
    fast = fast_rows(validator(cap, inline_limit=120), batch)
    slow = careful(validator(cap, inline_limit=120), batch)
    if slow is None:
        assert fast is None
    else:
        assert fast is None or fast == slow


@settings(max_examples=300, deadline=None)
@given(st.lists(cases, min_size=1, max_size=6))
def test_rows_and_leaves_equal_the_careful_path(batch: list[Any]) -> None:
    v = validator()
    fast = fast_rows(v, batch)
    slow = careful(validator(), batch)
    if fast is None:
        return
    assert fast == slow
    for case, row in zip(batch, fast[0], strict=True):
        scorer = SCORERS[(SUITE.checks[case["check_id"]].scorer_name, "1")]
        sent = {**case, "output_digest": row[8], "score": row[6], "assurance": row[14]}
        assert row[15] == case_leaf(sent, scorer.digest)


def _common(count: int, check_id: str = "pass") -> list[dict[str, Any]]:
    return [
        {
            "check_id": check_id,
            "example_id": EXAMPLES[i % len(EXAMPLES)],
            "repeat": i // len(EXAMPLES) % 2,
            "status": "pass" if i % 3 else "fail",
            "score": None if check_id == "pass" else (i % 5) / 4,
            "output": {"answer": "x" * (i * 37 % 300), "n": i},
        }
        for i in range(count)
    ]


@pytest.mark.parametrize("check_id", ["pass", "mean"])
def test_the_common_shape_takes_the_lane(check_id: str) -> None:
    batch = _common(60, check_id)
    fast = fast_rows(validator(), batch)
    assert fast is not None
    rows, long_outputs = fast
    assert (rows, long_outputs) == careful(validator(), batch)
    assert long_outputs, "some outputs pass 128 bytes and leave the row"
    # Every case has an output: those that left the row are exactly the long ones.
    assert sum(row[7] is None for row in rows) == len(long_outputs)


def test_a_refused_case_anywhere_sends_the_batch_case_by_case() -> None:
    batch = _common(10)
    v = validator()
    batch[7] = {**batch[7], "repeat": 3}
    assert fast_rows(v, batch) is None
    with pytest.raises(ProblemError) as refused:
        v.rows(list(enumerate(batch, start=1)))
    assert refused.value.index == 8
    assert "repeat" in str(refused.value.errors)


def test_the_validator_takes_the_lane_and_keeps_its_long_outputs() -> None:
    batch = _common(20)
    v = validator()
    rows = v.rows(list(enumerate(batch)))
    expected_rows, expected_outputs = careful(validator(), batch)  # type: ignore[misc]
    assert rows == expected_rows
    assert v.outputs == expected_outputs
