"""Strict I-JSON (RFC 7493) parsing: refuses what would make digests differ between languages.

Refused: invalid UTF-8, non-finite numbers (NaN, Infinity, 1e400), duplicate object keys,
numbers (integers, and doubles, which are all integral that large) beyond ±(2^53 − 1), lone
surrogates, and U+0000 (which no PostgreSQL text column can hold, and every string this service
receives is stored as text). The fast path is orjson plus two cheap byte
checks; anything it cannot clear is re-parsed by the slow path, which names the location.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import orjson

from app.domain.errors import validation_error

MAX_SAFE_INTEGER = 2**53 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")
_NUL = "\x00"
# Every digit as 0, so that runs of digits and exponents are found by plain byte searches.
DIGITS_AS_ZEROS = bytes.maketrans(b"0123456789", b"0000000000")
# As many digits as no integer within ±(2^53 − 1) has.
LONG_DIGIT_RUN = b"0" * 16
_POSITIVE_EXPONENT = b"e+"

Location = tuple[str | int, ...]


class InvalidJSON(ValueError):
    """The input is not strict I-JSON; `loc` is the JSON path (or line/column) of the fault."""

    def __init__(self, loc: Location, msg: str) -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg


def _count_keys(value: Any) -> int:
    """Count object keys in a parsed value; numbers that may be out of range need the slow path.

    orjson turns integers beyond 64 bits into floats, so a large integral float may have been
    an integer literal: the slow path, which sees the literal, decides.
    """
    kind = type(value)
    if kind is dict:
        count = len(value)
        items = value.values()
    elif kind is list:
        count = 0
        items = value
    else:
        if (kind is int or kind is float) and abs(value) > MAX_SAFE_INTEGER:
            raise _NeedSlowPath
        return 0
    for item in items:
        item_kind = type(item)
        if item_kind is dict or item_kind is list:
            count += _count_keys(item)
        elif (item_kind is int or item_kind is float) and abs(item) > MAX_SAFE_INTEGER:
            raise _NeedSlowPath
    return count


class _NeedSlowPath(Exception):
    pass


def parse_strict(data: bytes, base: Location = ("body",)) -> Any:
    """Parse bytes as strict I-JSON, raising InvalidJSON with the fault's location."""
    try:
        value = orjson.loads(data)
        # Without backslashes no string holds a quote, and without white space before a colon every
        # key ends in exactly one `":`; strings that start with ":" only add to the count, so
        # equality with the parsed key count proves there was no duplicate key.
        if b"\\" in data or b" :" in data or b"\t:" in data or b"\n:" in data or b"\r:" in data:
            raise _NeedSlowPath
        if data.count(b'":') != _count_keys(value):
            raise _NeedSlowPath
        return value
    except (orjson.JSONDecodeError, _NeedSlowPath):
        return _parse_slow(data, base)


def parse_lines_fast(lines: list[bytes]) -> list[Any] | None:
    """Many NDJSON lines through the fast path at once, or None when any line needs the
    careful one (the caller then parses line by line, to name the faulty line).

    No Python walks the values: orjson writes them back as one document, and its bytes answer
    both questions. Duplicate keys: without backslashes the strings orjson writes back are the
    very bytes that were sent, so every colon outside them is one key's, and a duplicate (which
    orjson keeps once) shows as one colon fewer. Large numbers: orjson writes an integer past
    2^53 with at least 16 digits, and a float that large with 16 digits or, from 1e16 on, a
    positive exponent (`1e+16`); a string that merely looks so sends the batch to the careful
    path, which decides."""
    joined = b"\n".join(lines)
    if b"\\" in joined:
        return None
    try:
        values = list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:
        return None
    written = orjson.dumps(values)
    if joined.count(b":") != written.count(b":"):
        return None
    # A lone "+" is found by memchr; searching for "e+" itself walks every "e".
    if b"+" in written and _POSITIVE_EXPONENT in written:
        return None
    if LONG_DIGIT_RUN in written.translate(DIGITS_AS_ZEROS):
        return None
    return values


def parse_line(number: int, line: bytes) -> Any:
    """Strictly parse one NDJSON line; a failure is a 422 naming the line."""
    try:
        return parse_strict(line, (f"line {number}",))
    except InvalidJSON as exc:
        raise validation_error(exc.loc, exc.msg, index=number) from None


def parse_lines(numbers: Sequence[int], lines: list[bytes]) -> list[Any]:
    """Strictly parse numbered NDJSON lines: all at once when they can be, else line by line
    (a failure is a 422 naming the first faulty line)."""
    values = parse_lines_fast(lines)
    if values is None:
        values = list(map(parse_line, numbers, lines))
    return values


class _Pairs(list[tuple[str, Any]]):
    """An object as parsed, keeping duplicate keys so they can be found and located."""


class _Bad:
    """A number the slow path parsed but refuses, kept in place so it can be located."""

    def __init__(self, msg: str) -> None:
        self.msg = msg


def _parse_int(text: str) -> Any:
    value = int(text)
    if abs(value) > MAX_SAFE_INTEGER:
        return _Bad("integer beyond ±(2^53 − 1); send large identifiers as strings")
    return value


def _parse_float(text: str) -> Any:
    value = float(text)
    if not math.isfinite(value):
        return _Bad("number is not finite as an IEEE 754 double")
    if abs(value) > MAX_SAFE_INTEGER:
        # Every double this large is an integer, and RFC 8785 implementations disagree on
        # integers past 2^53; refusing them keeps every digest portable.
        return _Bad("number beyond ±(2^53 − 1); send it as a string")
    return value


def _parse_constant(text: str) -> Any:
    return _Bad(f"{text} is not a JSON number")


def _parse_slow(data: bytes, base: Location) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidJSON((*base, exc.start), "body is not valid UTF-8") from None
    try:
        raw = json.loads(
            text,
            object_pairs_hook=_Pairs,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except json.JSONDecodeError as exc:
        raise InvalidJSON(
            (*base, f"line {exc.lineno} column {exc.colno}"), f"invalid JSON: {exc.msg}"
        ) from None
    except RecursionError:
        raise InvalidJSON(base, "JSON nested too deeply") from None
    return _clean(raw, base)


def _clean(value: Any, loc: Location) -> Any:
    if isinstance(value, _Pairs):
        result: dict[str, Any] = {}
        for key, item in value:
            if _SURROGATE.search(key):
                raise InvalidJSON((*loc, key), "object key holds a lone surrogate")
            if _NUL in key:
                raise InvalidJSON((*loc, key), "object key holds U+0000 (NUL)")
            if key in result:
                raise InvalidJSON((*loc, key), f"duplicate object key {key!r}")
            result[key] = _clean(item, (*loc, key))
        return result
    if isinstance(value, list):
        return [_clean(item, (*loc, index)) for index, item in enumerate(value)]
    if isinstance(value, _Bad):
        raise InvalidJSON(loc, value.msg)
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise InvalidJSON(loc, "string holds a lone surrogate")
        if _NUL in value:
            raise InvalidJSON(loc, "string holds U+0000 (NUL), which text cannot store")
    return value
