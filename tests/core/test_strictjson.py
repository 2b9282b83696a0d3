"""Strict I-JSON parsing and canonical JSON, against json/rfc8785 as oracles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from app.digest.canonical import canonical_bytes, es_number, is_canonical
from app.digest.strictjson import InvalidJSON, parse_lines_fast, parse_strict

VECTORS = Path(__file__).resolve().parents[1] / "data" / "rfc8785"

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(min_value=-(2.0**53) + 1, max_value=2.0**53 - 1)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=20,
)
# What the service takes in: text without U+0000, which no PostgreSQL text column can hold.
stored_text = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"))
i_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(min_value=-(2.0**53) + 1, max_value=2.0**53 - 1)
    | stored_text,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(stored_text.filter(lambda k: len(k) <= 8), children, max_size=5)
    ),
    max_leaves=20,
)


@pytest.mark.parametrize(
    ("data", "loc", "fragment"),
    [
        (b'{"a": NaN}', ["body", "a"], "NaN"),
        (b'{"a": ["x\\u0000"]}', ["body", "a", 0], "U+0000"),
        (b'{"a\\u0000": 1}', ["body", "a\x00"], "U+0000"),
        (b'{"a": [1, Infinity]}', ["body", "a", 1], "Infinity"),
        (b'{"a": -Infinity}', ["body", "a"], "Infinity"),
        (b'{"a": 1e400}', ["body", "a"], "not finite"),
        (b'{"a": 1, "a": 2}', ["body", "a"], "duplicate"),
        (b'{"x": {"b": 1, "b": 1}}', ["body", "x", "b"], "duplicate"),
        (b'{"a" :1, "b" :":", "a":1}', ["body", "a"], "duplicate"),
        (b'{"a": 9007199254740992}', ["body", "a"], "2^53"),
        (b'{"a": -9007199254740992}', ["body", "a"], "2^53"),
        (b'{"a": 123456789012345678901234567890}', ["body", "a"], "2^53"),
        (b'{"a": 1e20}', ["body", "a"], "2^53"),
        (b'{"a": "\\ud800"}', ["body", "a"], "surrogate"),
        (b'{"\\udc00": 1}', ["body", "\udc00"], "surrogate"),
        (b'{"a": "\xff"}', ["body", 7], "UTF-8"),
        (b'{"a": ', ["body", "line 1 column 7"], "invalid JSON"),
    ],
)
def test_refuses_what_is_not_i_json(data: bytes, loc: list[object], fragment: str) -> None:
    with pytest.raises(InvalidJSON) as caught:
        parse_strict(data)
    assert list(caught.value.loc) == loc
    assert fragment in caught.value.msg


def test_accepts_the_edges_of_i_json() -> None:
    assert parse_strict(b'{"a": 9007199254740991, "b": -9007199254740991}') == {
        "a": 2**53 - 1,
        "b": -(2**53) + 1,
    }
    assert parse_strict(b'{"a": 1e15, "b": -0.0, "c": "\\ud83d\\ude00"}') == {
        "a": 1e15,
        "b": -0.0,
        "c": "😀",
    }
    assert parse_strict(b'{"k": ":", "j": "\\" :"}') == {"k": ":", "j": '" :'}


@settings(max_examples=300, deadline=None)
@given(i_json_values)
def test_parses_like_the_standard_library(value: object) -> None:
    for text in (
        json.dumps(value),
        json.dumps(value, indent=1),
        json.dumps(value, separators=(",", ":")),
    ):
        assert parse_strict(text.encode()) == json.loads(text)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_canonical_fast_path_equals_rfc8785(value: object) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)
    assert is_canonical(canonical_bytes(value))


@pytest.mark.parametrize("name", sorted(p.name for p in (VECTORS / "input").glob("*.json")))
def test_rfc8785_vectors(name: str) -> None:
    value = json.loads((VECTORS / "input" / name).read_text(encoding="utf-8"))
    assert canonical_bytes(value) == (VECTORS / "output" / name).read_bytes()


def test_non_canonical_bytes_are_detected() -> None:
    assert not is_canonical(b'{"b":1, "a":2}')
    assert not is_canonical(b'{"a":1.0}')
    assert is_canonical(b'{"a":1,"b":[true,null]}')


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_ecmascript_numbers_equal_rfc8785(value: float) -> None:
    assert es_number(value).encode() == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value", [1e-7, 1e21, 1e20, -0.0, 5e-324, 1.7976931348623157e308, 2.0**53, 2.0**60, 0.1, 1e-6]
)
def test_ecmascript_number_edges(value: float) -> None:
    assert es_number(value).encode() == rfc8785.dumps(value)


@settings(max_examples=300, deadline=None)
@given(st.lists(json_values, min_size=1, max_size=8), st.integers(min_value=0, max_value=7))
def test_batched_lines_equal_line_by_line_parsing(values: list[object], spoil: int) -> None:
    lines = [json.dumps(v, separators=(",", ":")).encode() for v in values]
    fast = parse_lines_fast(lines)
    assert fast is None or fast == [parse_strict(line) for line in lines]
    # A duplicate key in any one line must send the batch to the careful path.
    at = spoil % len(lines)
    spoiled = [*lines[:at], b'{"k":1,"k":2}', *lines[at:]]
    assert parse_lines_fast(spoiled) is None
    with pytest.raises(InvalidJSON):
        parse_strict(spoiled[at])


def test_batched_lines_refuse_what_single_lines_refuse() -> None:
    assert parse_lines_fast([b'{"a":1}', b'{"b":2}']) == [{"a": 1}, {"b": 2}]
    for bad in ([b'{"a":1', b"}"], [b'{"a":"x"', b":1}"], [b'{"a":NaN}'], [b'{"a":1e400}']):
        assert parse_lines_fast(bad) is None


# Numbers either side of ±2^53 (as integers of any size and as floats, exponents included) and
# keys drawn from a small alphabet, so that duplicates and big numbers turn up often.
edgy_numbers = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([2**53 - 1, 2**53, -(2**53), 2**64 - 1, 2**64 + 1])
    | st.floats(allow_nan=False, allow_infinity=False)
)
edgy_values = st.recursive(
    st.none() | st.booleans() | edgy_numbers | st.text(alphabet="ab:e0 1{}[],", max_size=6),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(st.tuples(st.sampled_from(["a", "b", ":", "a b"]), children), max_size=4)
    ),
    max_leaves=12,
)


def _written(value: object, spaced: bool) -> str:
    """JSON text of an edgy value; pairs lists become objects (duplicate keys kept)."""
    colon, comma = (" : ", " , ") if spaced else (":", ",")
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        members = (json.dumps(k) + colon + _written(v, spaced) for k, v in value)
        return "{" + comma.join(members) + "}"
    if isinstance(value, list):
        return "[" + comma.join(_written(v, spaced) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value)


@settings(max_examples=1000, deadline=None)
@given(st.lists(edgy_values, min_size=1, max_size=5), st.booleans())
def test_batched_lines_are_fast_only_where_every_line_is_strict(
    values: list[object], spaced: bool
) -> None:
    lines = [b'{"v":' + _written(v, spaced).encode() + b"}" for v in values]
    expected = []
    for line in lines:
        try:
            expected.append(parse_strict(line))
        except InvalidJSON:
            expected = None
            break
    fast = parse_lines_fast(lines)
    if expected is None:
        assert fast is None
    else:
        assert fast is None or fast == expected


@pytest.mark.parametrize(
    "line",
    [
        b'{"a":9007199254740992}',
        b'{"a":[1,{"b":-9007199254740993}]}',
        b'{"a":18446744073709551617}',
        b'{"a":1e300}',
        b'{"a":1.5E16}',
        b'{"a":9007199254740992.0}',
        b'{"a":1,"a" :2}',
        b'{"a":{"b":1,"b":1}}',
        b'{"a":"\\u0000"}',
    ],
)
def test_batched_lines_refuse_large_numbers_and_duplicates(line: bytes) -> None:
    with pytest.raises(InvalidJSON):
        parse_strict(line)
    assert parse_lines_fast([b'{"ok":1}', line]) is None
