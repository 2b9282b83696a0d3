"""Writing v1 bundle lines in canonical form (the fields each kind holds are in
app/bundles/format.py)."""

from __future__ import annotations

from typing import Any

import orjson

from app.digest.canonical import es_number

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


def case_line(
    kind: bytes,
    check_id: bytes,
    row: Any,
    scorer_digest: bytes,
    output: bytes | None,
) -> bytes:
    """A `case` or `baseline_case` line written key by key in canonical order (the hot path
    of a bundle: a dict and a sort per case cost a third more). `kind`, `check_id` and
    `scorer_digest` come already as JSON; `output` is the stored canonical output or None."""
    dumps = orjson.dumps
    parts = [
        b'{"assurance":',
        dumps(row["assurance"]),
        b',"check_id":',
        check_id,
        b',"evidence_refs":',
        dumps(row["evidence_refs"] or []),
        b',"example_id":',
        dumps(row["example_id"]),
        b',"kind":',
        kind,
    ]
    measures = row.get("measures")
    if measures is not None:
        # Stored as the canonical JSON the case's leaf commits to.
        parts += (b',"measures":', measures.encode())
    if output is not None:
        parts += (b',"output":', output)
    score = row["score"]
    parts += (
        b',"output_digest":',
        dumps(row["output_digest"]),
        b',"repeat":',
        str(row["repeat"]).encode(),
        b',"score":',
        b"null" if score is None else es_number(score).encode(),
        b',"scorer_digest":',
        scorer_digest,
        b',"status":',
        dumps(row["status"]),
    )
    if row["trace_id"] is not None:
        parts += (
            b',"trace_ref":',
            dumps({"digest": row["trace_digest"], "id": row["trace_id"]}),
        )
    parts.append(b"}")
    return b"".join(parts)
