"""What a v1 bundle line looks like, shared by the builder and the verifier."""

from __future__ import annotations

from typing import Any

import orjson

from app.canonical import canonical_bytes, es_number

FORMAT = "evalbook.reproducibility_bundle.v1"
MEDIA_TYPE = "application/vnd.evalbook.bundle.v1+jsonl.gzip"
CASE_LIMIT = 20_000
_SORTED = orjson.OPT_SORT_KEYS


def raw(json_bytes: bytes | str) -> orjson.Fragment:
    """Already-canonical JSON (a stored body, output or manifest) to splice into a line."""
    return orjson.Fragment(json_bytes)


def number(value: float | None) -> orjson.Fragment | None:
    """A float in its canonical (ECMAScript) form."""
    return None if value is None else orjson.Fragment(es_number(value))


def line(fields: dict[str, Any]) -> bytes:
    """One canonical bundle line (without its newline).

    Every key the builder writes is ASCII, so orjson's sorted keys are RFC 8785 order; values
    are strings, integers, booleans, null, or fragments already in canonical form.
    """
    return orjson.dumps(fields, option=_SORTED)


def canonical_line(value: Any) -> bytes:
    """The canonical form of a parsed line (the verifier's yardstick)."""
    return canonical_bytes(value)
