"""Edits a forger (or a broken tool) makes to a bundle's lines, shared by the conformance set
generator and the fuzz test."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import orjson
import rfc8785

Lines = list[bytes]


def canonical(value: Any) -> bytes:
    """RFC 8785 through the reference implementation."""
    return rfc8785.dumps(value)


def reseal(lines: Lines) -> Lines:
    """Recompute the trailer over the lines before it (a careful forger would)."""
    body = [line for line in lines if not line.startswith(b'{"kind":"trailer",')]
    digest = hashlib.sha256(b"".join(line + b"\n" for line in body)).hexdigest()
    trailer = canonical({"kind": "trailer", "lines": len(body), "sha256": "sha256:" + digest})
    return [*body, trailer]


def index_of(lines: Lines, predicate: Callable[[dict[str, Any]], bool]) -> int:
    """The first line whose parsed value satisfies `predicate`."""
    return next(i for i, line in enumerate(lines) if predicate(orjson.loads(line)))


def edit(
    lines: Lines,
    predicate: Callable[[dict[str, Any]], bool],
    change: Callable[[dict[str, Any]], None],
) -> Lines:
    """Apply `change` to the first matching line, written canonically again."""
    out = list(lines)
    at = index_of(out, predicate)
    value = orjson.loads(out[at])
    change(value)
    out[at] = canonical(value)
    return out


def kind(line_kind: str, /, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    """A predicate: lines of this kind with these field values."""
    return lambda v: v["kind"] == line_kind and all(v.get(k) == f for k, f in fields.items())


def flip_score(value: dict[str, Any]) -> None:
    value["score"] = round(1.0 - value["score"], 6)


def extend_validity(value: dict[str, Any]) -> None:
    """Push the envelope's expires_at a year out."""
    moment = datetime.strptime(value["envelope"]["expires_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
    value["envelope"]["expires_at"] = (moment + timedelta(days=365)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )


def drop(lines: Lines, predicate: Callable[[dict[str, Any]], bool]) -> Lines:
    out = list(lines)
    del out[index_of(out, predicate)]
    return out


def non_canonical_report(lines: Lines) -> Lines:
    out = list(lines)
    at = index_of(out, kind("report"))
    out[at] = json.dumps(orjson.loads(out[at]), ensure_ascii=False).encode()
    return out


def splice(lines: Lines) -> Lines:
    out = list(lines)
    at = index_of(out, kind("case", check_id="no_harm", example_id="e04"))
    out.insert(at + 1, out[at])
    return out


def gz(lines: Lines) -> bytes:
    return gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0)
