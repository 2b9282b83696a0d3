"""RFC 8785 canonical JSON and sha256 digests, in one place.

`rfc8785` is the reference implementation. orjson with sorted keys writes the very same bytes
for values without floats whose object keys sort the same in UTF-8 and UTF-16 (no key character
at or above U+E000), so those take the fast path; everything else goes through `rfc8785`.
Property tests hold the two paths equal.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import rfc8785

DIGEST_PREFIX = "sha256:"
_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS
_SAFE_KEY_MAX = "\ud7ff"


def _orjson_safe(value: Any) -> bool:
    """True when orjson's sorted output is byte-identical to RFC 8785 for this value."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is dict:
        for key, item in value.items():
            if key and max(key) > _SAFE_KEY_MAX:
                return False
            item_kind = type(item)
            if item_kind is str or item_kind is int or item_kind is bool or item is None:
                continue
            if not _orjson_safe(item):
                return False
        return True
    if kind is list:
        return all(_orjson_safe(item) for item in value)
    return False


def canonical_bytes(value: Any) -> bytes:
    """Serialize a JSON value to its RFC 8785 canonical UTF-8 bytes."""
    if _orjson_safe(value):
        return orjson.dumps(value, option=_ORJSON_OPTIONS)
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
