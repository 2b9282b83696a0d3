"""The verifier's number checks after parsing agree with the exact token scan on every line
the cheap hint flags (app/bundles/lexical.py): orjson's reading of a large number never
decides whether a line is refused."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.bundles.lexical import (
    MAX_SAFE_INTEGER,
    may_hold_long_number,
    number_problem,
    parsed_number_problem,
)

LINES = [
    b'{"n":9007199254740991}',  # 2^53 - 1: allowed
    b'{"n":9007199254740992}',  # 2^53
    b'{"n":-9007199254740993}',
    b'{"n":18446744073709551615}',  # 2^64 - 1: orjson reads it exactly
    b'{"n":18446744073709551617}',  # 2^64 + 1: orjson reads a float
    b'{"n":-9223372036854775809}',
    b'{"n":123456789012345678901234567890}',
    b'{"a":[1,{"b":[99999999999999999]}]}',
    b'{"n":1e300}',
    b'{"n":12345678901234567.5}',
    b'{"n":1234567890123456e-10}',
    b'{"s":"1234567890123456789012"}',  # digits inside a string are no number
    b'{"s":"\\"12345678901234567890","n":1}',
]


@pytest.mark.parametrize("line", LINES)
def test_parsed_check_agrees_with_the_exact_scan(line: bytes) -> None:
    assert may_hold_long_number(line) == (line != b'{"n":1e300}')
    assert parsed_number_problem(line, orjson.loads(line)) == number_problem(line)


def test_the_examples_refuse_what_they_should() -> None:
    refused = [line for line in LINES if number_problem(line) is not None]
    assert len(refused) == 7
    assert b'{"n":9007199254740991}' not in refused


@given(st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=20))
def test_any_integer_beside_a_string(number: int, text: str) -> None:
    line = b'{"n":%d,"s":%s}' % (number, orjson.dumps(text))
    problem = parsed_number_problem(line, orjson.loads(line))
    assert problem == number_problem(line)
    assert (problem is not None) == (abs(number) > MAX_SAFE_INTEGER)
    if problem is not None:
        assert may_hold_long_number(line)
