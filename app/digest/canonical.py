"""RFC 8785 canonical JSON and sha256 digests, in one place.

`rfc8785` is the reference implementation. orjson with sorted keys writes the very same bytes
for strings, integers, booleans and null when object keys sort the same in UTF-8 and UTF-16
(no key character at or above U+E000); floats are written in ECMAScript form first and handed
to orjson as fragments. Anything else goes through `rfc8785`. Property tests hold the two
paths equal.
"""

from __future__ import annotations

import functools
import hashlib
from datetime import UTC, datetime
from typing import Any

import orjson
import rfc8785

DIGEST_PREFIX = "sha256:"
_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS
_SAFE_KEY_MAX = "\ud7ff"
_EXACT_INTEGER = 2.0**53
# Values orjson writes as RFC 8785 does, left as they are.
_AS_THEY_ARE = frozenset({str, int, bool, type(None)})


class _NeedsReference(Exception):
    """The value has a key whose UTF-8 and UTF-16 orders may differ."""


def es_number(value: float) -> str:
    """A finite float in ECMAScript Number::toString form (RFC 8785 section 3.2.2.3)."""
    if value.is_integer():
        if -_EXACT_INTEGER < value < _EXACT_INTEGER:
            return str(int(value))
        return rfc8785.dumps(value).decode()
    text = repr(value)
    # Python and ECMAScript print the same shortest digits; they differ only in when and how
    # they switch to exponent form, so those cases go to the reference implementation.
    if "e" in text or "n" in text:
        return rfc8785.dumps(value).decode()
    return text


def _prepared(value: Any) -> Any:
    """`value` with floats replaced by ECMAScript-form fragments (a copy only where needed)."""
    kind = type(value)
    if kind is float:
        return orjson.Fragment(es_number(value))
    if kind is dict:
        return _prepared_dict(value)
    if kind is list:
        return _prepared_list(value)
    return value


def _prepared_dict(value: dict[str, Any]) -> dict[str, Any]:
    copy: dict[str, Any] | None = None
    for key, item in value.items():
        if not key.isascii() and max(key) > _SAFE_KEY_MAX:
            raise _NeedsReference
        item_kind = type(item)
        if item_kind is str or item_kind is int or item_kind is bool or item is None:
            continue
        new = _prepared(item)
        if new is not item:
            if copy is None:
                copy = dict(value)
            copy[key] = new
    return value if copy is None else copy


def _prepared_list(value: list[Any]) -> list[Any]:
    # A list of strings (a manifest of digests) needs no copy, found without a Python loop.
    if set(map(type, value)) <= _AS_THEY_ARE:
        return value
    items: list[Any] | None = None
    for index, item in enumerate(value):
        item_kind = type(item)
        if item_kind is str or item_kind is int or item_kind is bool or item is None:
            continue
        new = _prepared(item)
        if new is not item:
            if items is None:
                items = list(value)
            items[index] = new
    return value if items is None else items


def canonical_bytes(value: Any) -> bytes:
    """Serialize a JSON value to its RFC 8785 canonical UTF-8 bytes."""
    try:
        return orjson.dumps(_prepared(value), option=_ORJSON_OPTIONS)
    except (_NeedsReference, orjson.JSONEncodeError):
        return rfc8785.dumps(value)


def digest_of_bytes(data: bytes) -> str:
    """Return the `sha256:<hex>` digest of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """Return the `sha256:<hex>` digest of a JSON value's canonical bytes."""
    return digest_of_bytes(canonical_bytes(value))


def canonical_and_digest(value: Any) -> tuple[bytes, str]:
    """Return a value's canonical bytes and their digest."""
    data = canonical_bytes(value)
    return data, digest_of_bytes(data)


def is_canonical(data: bytes) -> bool:
    """True when `data` is exactly the canonical form of the JSON it holds."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return canonical_bytes(parsed) == data


@functools.lru_cache(maxsize=4096)
def timestamp(moment: datetime) -> str:
    """RFC 3339 UTC with microseconds, as the body writes times (the hot reads format the same
    few envelope times over and over, hence the cache)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
