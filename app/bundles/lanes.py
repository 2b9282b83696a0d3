"""What the verifier's fast lanes share: checks made on a whole run of lines at once.

A lane takes a run of lines of one kind (case lines, example lines), checks them together and
records them as `Verifier.feed` would, or hands the run back untouched for `feed` to check line
by line. Each check here is sufficient for the careful path to find nothing, never necessary:
what a lane cannot judge cheaply goes the careful way.
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import TYPE_CHECKING, Any

import orjson

from app.bundles.lexical import BOM, MAX_DEPTH, holds_large_number, may_hold_surrogate_escape
from app.digest.canonical import canonical_bytes
from app.digest.sha256 import short_digests
from app.domain.measures import measures_problem

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.bundles.admission import Reading

EXACT = 2**53
_SAFE_KEY_MAX = "\ud7ff"
_DIGEST_LINES = re.compile(r"(?:sha256:[0-9a-f]{64}\n)*")
_PREFIX = "sha256:"


def all_strings(values: list[Any]) -> bool:
    """Whether every value is a string (checked before values are hashed into a set: a
    forged line may hold a list where a string belongs)."""
    return set(map(type, values)) <= {str}


def all_digests(values: list[Any]) -> bool:
    """Whether every value is a `sha256:<64 lowercase hex>` string (one regex pass)."""
    if not values:
        return True
    if set(map(type, values)) != {str}:
        return False
    return _DIGEST_LINES.fullmatch("\n".join(values) + "\n") is not None


def _integers(column: list[Any]) -> bool:
    return set(map(type, column)) <= {int} and (
        not column or (min(column) >= 0 and max(column) < EXACT)
    )


def _numbers(column: list[Any]) -> bool:
    return set(map(type, column)) <= {int, float}


def _measures(column: list[Any]) -> bool:
    return all(type(value) is dict and measures_problem(value) is None for value in column)


def _digests(column: list[Any]) -> bool:
    return all_strings(column) and all_digests(list(set(column)))


def _anything(column: list[Any]) -> bool:
    return True


_SCALAR_COLUMNS: dict[str, Callable[[list[Any]], bool]] = {
    "any": _anything,
    "string": all_strings,
    "digest": _digests,
    "integer": _integers,
    "number": _numbers,
    "measures": _measures,
}


def column_holds(type_: dict[str, Any], column: list[Any]) -> bool:
    """Whether every value of a column holds its type of the format's table (app/bundles/
    format.py), checked for the whole column at once; stricter than `shapes.holds` where a
    column cheaply can be (an integer must be an int below 2^53, not 1.0), never looser."""
    name = type_["type"]
    if name in _SCALAR_COLUMNS:
        return _SCALAR_COLUMNS[name](column)
    if name == "nullable":
        return column_holds(type_["of"], [value for value in column if value is not None])
    if name == "list":
        return set(map(type, column)) <= {list} and column_holds(
            type_["of"], list(itertools.chain.from_iterable(column))
        )
    if name == "one_of":
        return all_strings(column) and set(column) <= set(type_["values"])
    return False  # objects and shapes are not judged a column at a time


def lexically_plain(joined: bytes) -> bool:
    """The checks made before parsing, for a whole run: UTF-8, no BOM, no surrogate escape.
    Numbers are judged on the parsed run (`plain_json`, or a lane's own columns): it holds
    none at or beyond 2^53, the only numbers the careful path's exact scan may fault."""
    if not joined.isascii():
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
            return False
        if BOM in joined:
            return False
    return not may_hold_surrogate_escape(joined)


def open_run(
    reading: Reading,
    first_line: int,
    lines: list[bytes],
    phase: int,
    key_orders: frozenset[tuple[str, ...]],
    kinds: frozenset[str],
) -> tuple[bytes, list[dict[str, Any]]] | None:
    """(the run's bytes joined, its parsed lines) when the verifier is reading the lines' phase
    (not line 1, no trailer yet, a bundle so far) and the run passes `lexically_plain` and
    `parse_run`; else None."""
    if (
        first_line == 1
        or reading.phase != phase
        or reading.trailer_seen
        or reading.not_a_bundle is not None
    ):
        return None
    joined = b"\n".join(lines)
    if not lexically_plain(joined):
        return None
    values = parse_run(lines, key_orders, kinds)
    return None if values is None else (joined, values)


def take(reading: Reading, joined: bytes, lines: list[bytes]) -> None:
    """What admission records of every accepted line: its bytes in the stream hash, and the
    last line as the current canonical one."""
    reading.stream_hash.update(joined)
    reading.stream_hash.update(b"\n")
    reading.line = lines[-1]


def parse_run(
    lines: list[bytes], key_orders: frozenset[tuple[str, ...]], kinds: frozenset[str]
) -> list[dict[str, Any]] | None:
    """The run's lines parsed, when each is a canonical-looking object with one of the key
    sequences given and of one of the kinds given; else None. Canonical as far as
    orjson can tell: the run re-serialized with sorted keys is the run itself (floats and
    keys beyond U+D7FF are left to the lanes' own checks)."""
    try:
        values = list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:
        return None
    if set(map(type, values)) != {dict} or not set(map(tuple, values)) <= key_orders:
        return None
    found = [value["kind"] for value in values]
    if not all_strings(found) or not set(found) <= kinds:
        return None
    try:
        written = orjson.dumps(values, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # nesting beyond orjson's limit (the careful path's too)
        return None
    return values if written == b"[" + b",".join(lines) + b"]" else None


def plain_json(value: Any, depth: int) -> bool:
    """Whether a value nested at `depth` in its line is written by orjson as RFC 8785 writes it
    and needs no exact number scan: no float, no integer at or beyond 2^53 in magnitude, no key
    whose UTF-8 and UTF-16 orders may differ, no nesting deeper than the limit."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-EXACT < value < EXACT)
    if depth > MAX_DEPTH:
        return False
    if kind is dict:
        keys = "".join(value)
        if not keys.isascii() and max(keys) > _SAFE_KEY_MAX:
            return False
        for item in value.values():
            if type(item) is not str and not plain_json(item, depth + 1):
                return False
        return True
    if kind is list:
        return all(type(item) is str or plain_json(item, depth + 1) for item in value)
    return False


def _judged(line: bytes, member: bytes, item: Any) -> bool:
    """Whether a member that is not plain JSON can be judged here: canonical itself, nesting no
    deeper than the limit, holding no number the exact scan would judge."""
    return (
        line.count(b"[") + line.count(b"{") <= MAX_DEPTH
        and not holds_large_number(item)
        and canonical_bytes(item) == member
    )


def members_match(
    lines: list[bytes], values: list[dict[str, Any]], indexes: list[int], name: str, digest: str
) -> bool:
    """Whether the member `name` of each line at `indexes` (cut from the canonical line: the
    key's first occurrence up to the last of the next key, `digest`) hashes to that line's
    `digest`; a member that is not plain JSON must be canonical itself, nest no deeper than
    the limit and hold no number the exact scan would judge."""
    key, follower = f'"{name}":'.encode(), f',"{digest}":'.encode()
    chosen = [lines[index] for index in indexes]
    starts = [line.find(key) for line in chosen]
    ends = [line.rfind(follower) for line in chosen]
    if min(starts) < 0 or not all(map(operator.lt, starts, ends)):
        return False
    skip = len(key)
    members = [
        line[start + skip : end] for line, start, end in zip(chosen, starts, ends, strict=True)
    ]
    items = [values[index][name] for index in indexes]
    for line, member, item in zip(chosen, members, items, strict=True):
        if type(item) is not str and not plain_json(item, 2) and not _judged(line, member, item):
            return False
    return [_PREFIX + digest.hex() for digest in short_digests(members)] == [
        values[index][digest] for index in indexes
    ]
