"""The column-wise ingestion lane (app/ingestion/columns.py) against the careful path: it accepts only batches the careful path accepts, with the very same rows, long
outputs and leaves, and it does take the common shape (else it would be no lane at all)."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from app.digest.canonical import canonical_bytes
from app.digest.merkle import case_leaf
from app.domain.errors import ProblemError
from app.domain.suites import CompiledCheck, CompiledSuite
from app.ingestion import CaseValidator, ScorerInfo, ValidatedBatch, validate_batch
from app.ingestion.columns import value_rows

EXAMPLES = ["a", "b", 'q"uote', "ü-nicode", "tab\there", "z", "50%s", "%d%%"]
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


EVALUATION_ID = uuid.UUID(int=7)


def validator(
    cap: str = "platform_verified",
    inline_limit: int = 4096,
    ndjson: bool = False,
    evaluation_id: uuid.UUID = EVALUATION_ID,
) -> CaseValidator:
    """A validator of the two-check suite (no database: the suite is compiled by hand)."""
    return CaseValidator(
        evaluation_id=evaluation_id,
        suite=SUITE,
        scorers=SCORERS,
        assurance_cap=cap,
        object_prefix="outputs/o/p",
        inline_limit=inline_limit,
        ndjson=ndjson,
    )


def careful(v: CaseValidator, cases: list[Any]) -> ValidatedBatch | None:
    """The careful path's answer, or None when it refuses a case or stores an output as an
    object (which the lanes never do)."""
    try:
        validated = v.careful_rows(range(len(cases)), cases)
    except ProblemError:
        return None
    return None if validated.uploads else validated


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
    fast = value_rows(validator(cap, inline_limit=120), batch)
    slow = careful(validator(cap, inline_limit=120), batch)
    if slow is None:
        assert fast is None
    else:
        assert fast is None or fast == slow


@settings(max_examples=300, deadline=None)
@given(st.lists(cases, min_size=1, max_size=6))
def test_rows_and_leaves_equal_the_careful_path(batch: list[Any]) -> None:
    v = validator()
    fast = value_rows(v, batch)
    slow = careful(validator(), batch)
    if fast is None:
        return
    assert fast == slow
    for case, row in zip(batch, fast.rows, strict=True):
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
    fast = value_rows(validator(), batch)
    assert fast is not None
    rows, long_outputs = fast.rows, fast.long_outputs
    assert fast == careful(validator(), batch)
    assert long_outputs, "some outputs pass 128 bytes and leave the row"
    # Every case has an output: those that left the row are exactly the long ones.
    assert sum(row[7] is None for row in rows) == len(long_outputs)


def test_a_refused_case_anywhere_sends_the_batch_case_by_case() -> None:
    batch = _common(10)
    v = validator()
    batch[7] = {**batch[7], "repeat": 3}
    assert value_rows(v, batch) is None
    with pytest.raises(ProblemError) as refused:
        validate_batch(v, range(1, len(batch) + 1), batch)
    assert refused.value.index == 8
    assert "repeat" in str(refused.value.errors)


def test_the_validator_takes_the_lane_and_keeps_its_long_outputs() -> None:
    batch = _common(20)
    validated = validate_batch(validator(), range(len(batch)), batch)
    assert validated == careful(validator(), batch)
    assert validated.long_outputs


# Outputs whose canonical bytes orjson alone would get wrong (floats, keys that sort apart in
# UTF-8 and UTF-16) beside ones that only look so (a float's text inside a string).
TRICKY_OUTPUTS = [
    {"answer": "1.5e+3 and [1.5, 2e-7]"},
    {"score": 1.0},
    {"x": [0.1, 1e21, 1e-7, -0.0]},
    {"\ue000": 1, "\U0001f600": 2},
    {"ü": "ß", "a": None},
    "plain text",
    17,
    [True, False, None, {"b": 1, "a": 2}],
]


@pytest.mark.parametrize("shared", [False, True])
def test_output_digests_are_rfc8785_whatever_the_column_holds(shared: bool) -> None:
    """Each tricky output alone and all of them in one batch: every digest is RFC 8785's."""
    groups = [TRICKY_OUTPUTS] if shared else [[output] for output in TRICKY_OUTPUTS]
    for outputs in groups:
        batch = [
            {"check_id": "pass", "example_id": "a", "repeat": 0, "status": "pass", "output": o}
            for o in outputs
        ]
        # Distinct keys, so that the careful path stores every case.
        for index, item in enumerate(batch):
            item["repeat"], item["example_id"] = index % 3, EXAMPLES[index // 3]
        fast = value_rows(validator(), batch)
        assert fast is not None
        assert fast == careful(validator(), batch)
        digests = [row[8] for row in fast.rows]
        assert digests == [
            "sha256:" + hashlib.sha256(rfc8785.dumps(o)).hexdigest() for o in outputs
        ]


def test_uniform_and_mixed_key_sets_give_the_careful_rows() -> None:
    """A batch whose cases share their keys is read column-wise at once; one whose cases do
    not (a score here, none there) case by case: both as the careful path."""
    uniform = _common(12, "mean")
    mixed = [dict(item) for item in uniform]
    for item in mixed[::2]:
        del item["score"]
        item["status"] = "skipped"
    for batch in (uniform, mixed, list(reversed(mixed))):
        fast = value_rows(validator(), batch)
        assert fast is not None and fast == careful(validator(), batch)


def test_constant_fields_written_into_the_leaf_template_keep_percent_signs() -> None:
    """Example ids holding `%` shared by a whole batch, and a batch where nothing varies."""
    for example in ("50%s", "%d%%"):
        batch = [
            {"check_id": "pass", "example_id": example, "repeat": r, "status": "pass"}
            for r in range(3)
        ]
        fast = value_rows(validator(), batch)
        assert fast is not None and fast == careful(validator(), batch)
        single = value_rows(validator(), batch[:1])
        assert single is not None and single == careful(validator(), batch[:1])


def test_orjson_alone_writes_only_columns_without_floats_or_non_ascii() -> None:
    from app.ingestion.columns import _canonical_writer, _plain_sorted

    assert _canonical_writer([{"answer": "a1"}, "text", [1, None, True]]) is _plain_sorted
    for output in TRICKY_OUTPUTS[:5]:
        assert _canonical_writer([{"answer": "a1"}, output]) is canonical_bytes


def test_rows_carry_the_evaluation_id_object_they_are_given() -> None:
    # The service passes the driver's own UUID, whose 16 bytes asyncpg's COPY writes as they
    # are (of a uuid.UUID it builds them from an integer per row): neither path rebuilds it.
    from asyncpg.pgproto.pgproto import UUID as DriverUUID

    from app.repositories.cases import driver_uuid

    v = validator(evaluation_id=driver_uuid(uuid.UUID(int=7)))
    built = value_rows(v, _common(4))
    assert built is not None
    assert {type(row[0]) for row in built.rows} == {DriverUUID}
    assert {row[0] for row in built.rows} == {uuid.UUID(int=7)}
    assert type(v.careful_rows([0], _common(1)).rows[0][0]) is DriverUUID
