"""The lane that validates NDJSON case lines from their bytes (app/ingestion/lines.py): it
accepts only what strict parsing and the careful path accept, and builds their very rows."""

from __future__ import annotations

import json
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.digest.strictjson import parse_line
from app.domain.errors import ProblemError
from app.domain.suites import CompiledSuite
from app.ingestion import CaseValidator, ScorerInfo, validate_batch
from app.ingestion.lines import FIELDS, line_rows
from app.ingestion.rows import CASE_FIELDS
from tests.ingestion.test_columns import GRADER, GRADER_2, JUDGE, _check, careful, odd_cases

# Colons in check ids, example ids and scorer versions: the lane counts every colon of a line.
EXAMPLES = ["a", "b", "x:y", "::", 'q"uote', "ü-nicode", "tab\there", "50%s"]
POSITIONS = {example: rank for rank, example in enumerate(sorted(EXAMPLES))}
OTHER_POSITIONS = {"a": 0, "zz": 1}
# The examples JSON writes without escapes.
PLAIN = ["a", "b", "x:y", "::", "ü-nicode", "50%s"]


SUITE = CompiledSuite(
    uuid.uuid4(),
    {},
    {
        "pass": _check("pass", "pass_rate", 3, "judge", POSITIONS),
        "mean": _check("mean", "mean", 2, "grader", POSITIONS),
        "other": _check("other", "pass_rate", 1, "judge", OTHER_POSITIONS),
        "c:1": _check("c:1", "pass_rate", 3, "judge", POSITIONS),
    },
)
SCORERS = {
    ("judge", "1"): ScorerInfo(JUDGE, None, None),
    ("grader", "1"): ScorerInfo(GRADER, 0.0, 1.0),
    ("grader", "2:b"): ScorerInfo(GRADER_2, 0.0, 1.0),
}


def validator(inline_limit: int = 4096) -> CaseValidator:
    """A validator of the four-check suite (no database: the suite is compiled by hand)."""
    return CaseValidator(
        evaluation_id=uuid.UUID(int=9),
        suite=SUITE,
        scorers=SCORERS,
        assurance_cap="platform_verified",
        object_prefix="outputs/o/p",
        inline_limit=inline_limit,
        ndjson=True,
    )


def careful_lines(lines: list[bytes], inline_limit: int = 4096) -> Any:
    """Strict parsing line by line, then the careful path, or None when any line is refused."""
    try:
        values = [parse_line(number, line) for number, line in enumerate(lines, 1)]
    except ProblemError:
        return None
    return careful(validator(inline_limit), values)


def _sorted(case: Any) -> bytes:
    return orjson.dumps(case, option=orjson.OPT_SORT_KEYS)


def _spaced(case: Any) -> bytes:
    return json.dumps(case).encode()


def _unescaped(case: Any) -> bytes:
    return json.dumps(case, ensure_ascii=False, separators=(",", ":")).encode()


WRITERS = [orjson.dumps, _sorted, _spaced, _unescaped]

outputs = st.one_of(
    st.none(),
    st.fixed_dictionaries({"answer": st.text(max_size=150)}),
    st.fixed_dictionaries({"b": st.integers(-5, 5), "a": st.text("ab:", max_size=3)}),
    st.text(max_size=3),
    st.lists(st.integers(min_value=-(2**60), max_value=2**60) | st.floats(-2, 2), max_size=3),
    st.just({"k": 1.5, "a": [True, None]}),
    st.just({"n": 9007199254740993}),
    st.just([1e16, -0.0, 0]),
)
cases = st.fixed_dictionaries(
    {
        "check_id": st.sampled_from(["pass", "mean", "other", "c:1"]),
        "example_id": st.sampled_from([*EXAMPLES, "zz"]),
        "repeat": st.sampled_from([0, 1, 2]),
        "status": st.sampled_from(["pass", "fail", "error", "skipped"]),
    },
    optional={
        "score": st.none()
        | st.sampled_from([0, 1, 0.25, 0.5, 1.5, -0.1, 2**53, 1e300])
        | st.floats(0, 1),
        "output": outputs,
        "assurance": st.sampled_from(["reported", "platform_verified", "attested_isolated"]),
        "scorer_version": st.sampled_from(["1", "2:b"]) | st.none(),
        "evidence_refs": st.none(),
        "trace_ref": st.none(),
        "output_digest": st.none() | st.just(JUDGE),
    },
)


@st.composite
def valid_cases(draw: Any) -> dict[str, Any]:
    """A case the careful path takes (the lane's interesting side), with optional fields
    absent, null or set."""
    check_id = draw(st.sampled_from(sorted(SUITE.checks)))
    check = SUITE.checks[check_id]
    case: dict[str, Any] = {
        "check_id": check_id,
        "example_id": draw(st.sampled_from(sorted(check.example_positions))),
        "repeat": draw(st.integers(0, check.repeats - 1)),
        "status": draw(st.sampled_from(["pass", "fail", "error", "skipped"])),
    }
    if check.method == "mean" and case["status"] in ("pass", "fail"):
        case["score"] = draw(st.floats(0, 1) | st.sampled_from([0, 1]))
    elif draw(st.booleans()):
        case["score"] = None
    optional = {
        "output": outputs.filter(lambda o: o != {"n": 9007199254740993}),
        "assurance": st.sampled_from(["reported", "platform_verified"]) | st.none(),
        "scorer_version": st.sampled_from(["1", "2:b"] if check_id == "mean" else ["1"])
        | st.none(),
        "evidence_refs": st.none(),
        "trace_ref": st.none(),
    }
    for name, values in optional.items():
        if draw(st.booleans()):
            case[name] = draw(values)
    return case


def _duplicated(line: bytes) -> bytes:
    """The line with its first key sent once more (with another value)."""
    return b'{"repeat":5,' + line[1:] if line.startswith(b"{") else line


def _output_duplicated(line: bytes) -> bytes:
    return line.replace(b'"output":{', b'"output":{"dup":1,"dup":2,', 1)


MUTATIONS = [
    lambda line: line,
    _duplicated,
    _output_duplicated,
    lambda line: line.replace(b'"a', b'"\\u0061', 1),
    # Escapes the strict parser refuses (U+0000, a lone surrogate) in an output.
    lambda line: line.replace(b'"answer":"', b'"answer":"\\u0000', 1),
    lambda line: line.replace(b'"answer":"', b'"answer":"\\ud800', 1),
    lambda line: line.replace(b'"answer":"', b'"answer":"\xff', 1),
    lambda line: line + b" ",
    lambda line: b" " + line.replace(b":", b" : ", 2),
    lambda line: line.replace(b'"repeat":0', b'"repeat":0.0', 1),
]


@st.composite
def line_batches(draw: Any) -> list[bytes]:
    values = draw(st.lists(valid_cases(), min_size=1, max_size=6))
    # Now and then one case of an odd shape, or one line's text mutated.
    departure = draw(st.sampled_from(["none", "none", "odd", "mutated"]))
    index = draw(st.integers(0, len(values) - 1))
    if departure == "odd":
        values[index] = draw(odd_cases | cases)
    writer = draw(st.sampled_from(WRITERS))
    lines = [writer(value) for value in values]
    if departure == "mutated":
        lines[index] = draw(st.sampled_from(MUTATIONS))(lines[index])
    return lines


@settings(max_examples=1500, deadline=None)
@given(line_batches(), st.sampled_from([4096, 120]))
def test_the_lane_accepts_only_what_strict_parsing_and_the_careful_path_accept(
    lines: list[bytes], inline_limit: int
) -> None:
    fast = line_rows(validator(inline_limit), lines)
    slow = careful_lines(lines, inline_limit)
    if slow is None:
        assert fast is None
    else:
        assert fast is None or fast == slow


def _common(count: int, check_id: str = "pass") -> list[bytes]:
    """Lines as a client writing sorted keys sends them: outputs already canonical."""
    return [
        _sorted(
            {
                "check_id": check_id,
                "example_id": PLAIN[i % len(PLAIN)],
                "repeat": i // len(PLAIN) % 2,
                "status": "pass" if i % 3 else "fail",
                "score": None if check_id == "pass" else (i % 5) / 4,
                "output": {"answer": "x" * (i * 37 % 300), "n": i, "tags": ["a:b", None]},
            }
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("check_id", ["pass", "mean", "c:1"])
def test_canonical_lines_take_the_lane(check_id: str) -> None:
    lines = _common(60, check_id)
    fast = line_rows(validator(), lines)
    assert fast is not None
    assert fast == careful_lines(lines)
    assert fast.long_outputs, "some outputs pass 128 bytes and leave the row"


def test_absent_and_null_outputs_and_fields_take_the_lane() -> None:
    lines = _common(9)
    lines[2] = b'{"check_id":"pass","example_id":"x:y","repeat":1,"status":"error"}'
    lines[4] = (
        b'{"check_id":"pass","example_id":"::","repeat":2,"status":"skipped","output":null,'
        b'"evidence_refs":null,"trace_ref":null,"score":null,"scorer_version":null,'
        b'"assurance":null,"output_digest":"' + JUDGE.encode() + b'"}'
    )
    fast = line_rows(validator(), lines)
    assert fast is not None and fast == careful_lines(lines)


@pytest.mark.parametrize(
    ("mutate", "fault"),
    [
        (_duplicated, "duplicate"),
        (_output_duplicated, "duplicate"),
        (lambda line: line.replace(b'"n":3', b'"n":9007199254740993'), "2^53"),
        (lambda line: line.replace(b'"score":null', b'"score":9007199254740993'), "2^53"),
        (lambda line: line.replace(b'"score":null', b'"score":1e400'), "finite"),
        (lambda line: line.replace(b'"answer":"', b'"answer":"\\u0000'), "U+0000"),
        (lambda line: line.replace(b'"answer":"', b'"answer":"\\ud800'), "surrogate"),
    ],
)
def test_a_line_strict_parsing_refuses_sends_the_batch_the_careful_way(
    mutate: Any, fault: str
) -> None:
    lines = _common(8)
    lines[3] = mutate(lines[3])
    v = validator()
    assert line_rows(v, lines) is None
    with pytest.raises(ProblemError) as refused:
        validate_batch(v, range(11, 19), lines)
    assert refused.value.index == 14
    assert fault in str(refused.value)


def test_outputs_not_sent_canonically_are_written_as_before() -> None:
    """Unsorted keys, white space, a float: the lane declines, the values' way builds the same
    rows, and the request's later batches no longer try the lane."""
    for variant in (orjson.dumps, _spaced):
        lines = [variant(orjson.loads(line)) for line in _common(12)]
        lines[5] = lines[5].replace(b'"n":5', b'"n":5.5')
        v = validator()
        assert line_rows(v, lines) is None
        assert validate_batch(v, range(1, 13), lines) == careful_lines(lines)
        assert v.lines_lane is False
        # A later batch in canonical form goes the values' way too, with the same rows.
        later = _common(60)
        assert validate_batch(v, range(13, 73), later) == careful_lines(later)
        assert v.lines_lane is False


def test_the_validator_keeps_the_lanes_long_outputs() -> None:
    lines = _common(20)
    v = validator()
    validated = validate_batch(v, range(1, 21), lines)
    assert v.lines_lane is True
    assert validated == careful_lines(lines)
    assert validated.long_outputs


@settings(max_examples=500, deadline=None)
@given(st.floats(0, 1) | st.integers(0, 1), st.sampled_from(["%r", "%.17g", "%.3e", "%.20f"]))
def test_scores_decode_to_the_strict_parsers_doubles(score: float, spelling: str) -> None:
    line = (
        b'{"check_id":"mean","example_id":"a","repeat":0,"status":"pass","score":'
        + (spelling % score).encode()
        + b"}"
    )
    fast = line_rows(validator(), [line])
    assert fast is not None
    assert fast == careful_lines([line])


@pytest.mark.parametrize(
    "departure",
    [
        b',"evidence_refs":["' + JUDGE.encode() + b'"]',
        b',"evidence_refs":[]',
        b',"trace_ref":{"id":"t","digest":"' + JUDGE.encode() + b'"}',
    ],
)
def test_evidence_and_traces_go_the_values_way(departure: bytes) -> None:
    lines = _common(6)
    lines[2] = lines[2][:-1] + departure + b"}"
    assert line_rows(validator(), lines) is None
    assert validate_batch(validator(), range(1, 7), lines) == careful_lines(lines)


def test_a_blank_line_is_not_taken_for_a_case() -> None:
    """The decoder skips blank lines, which would shift every later case's line number."""
    lines = _common(4)
    assert line_rows(validator(), [*lines[:2], b"  ", *lines[2:]]) is None


def test_the_decoder_knows_every_case_field() -> None:
    assert set(FIELDS) == CASE_FIELDS


# Numbers of every form RFC 8785 and orjson write differently (integral floats, exponents),
# within I-JSON's 2^53 (beyond it the strict parser refuses a number wherever it stands).
MEASURE_VALUES = [
    0,
    0.0,
    1000.0,
    812.5,
    1e-7,
    1.5e-5,
    0.0004,
    123456789.0,
    1e15 + 0.5,
    2.0**52,
    9007199254740991,
    5e-324,
    0.1 + 0.2,
]


@pytest.mark.parametrize("value", MEASURE_VALUES)
@pytest.mark.parametrize("write", [_sorted, _spaced])
def test_measures_take_the_lanes_with_the_careful_paths_rows(value: float, write: Any) -> None:
    lines = [
        write(
            {
                "check_id": "pass",
                "example_id": PLAIN[i],
                "repeat": 0,
                "status": "pass",
                "measures": {"latency_ms": value, "cost_usd": 0.25 * i, "a:b": i}
                if i % 2
                else {"zeta": value, "alpha": 3.5},
            }
        )
        for i in range(5)
    ]
    slow = careful_lines(lines)
    assert slow is not None
    assert validate_batch(validator(), range(1, 6), lines).rows == slow.rows
    fast = line_rows(validator(), lines)
    assert fast is None or fast.rows == slow.rows


@pytest.mark.parametrize(
    ("measures", "fault"),
    [
        (b'{"latency_ms":1,"latency_ms":2}', "duplicate"),
        (b'{"latency_ms":-1}', ">= 0"),
        (b'{"latency_ms":9007199254740993}', "2^53"),
        (b'{"latency_ms":1e400}', "finite"),
        (b'{"latency_ms":"1"}', ">= 0"),
        (b'{"a b":1}', "identifier"),
        (b"[1]", "object"),
    ],
)
def test_bad_measures_are_named_whichever_lane_sees_them(measures: bytes, fault: str) -> None:
    lines = [
        b'{"check_id":"pass","example_id":"%s","repeat":0,"measures":{"m":1},"status":"pass"}'
        % e.encode()
        for e in PLAIN[:4]
    ]
    lines[2] = lines[2].replace(b'{"m":1}', measures)
    v = validator()
    assert line_rows(v, lines) is None
    with pytest.raises(ProblemError) as refused:
        validate_batch(v, range(1, 5), lines)
    assert refused.value.index == 3
    assert fault in str(refused.value)
