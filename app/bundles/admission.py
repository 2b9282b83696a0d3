"""Admitting a parsed line before its kind's checks run: where the reading stands (the phase
state the careful path and the fast lanes share) and the checks every line passes first.

A line is admitted when its kind is known, it is not a second once-only line, and its required
fields are there with the types its checks read; each fault on the way is a finding. An
admitted line leaves as its kind's typed value (app/bundles/lines.py), decoded once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from app.bundles.format import ALLOWED, FORMAT, ONCE, PHASES, REQUIRED
from app.bundles.lines import BundleLine, MalformedCase, decoded
from app.bundles.results import Finding, failure
from app.bundles.shapes import line_problem
from app.digest.canonical import canonical_bytes, digest_of, digest_of_bytes

# The phases of a dataset's example lines and of the checks with their cases: leaving either
# ends the dataset being read.
_EXAMPLES_END = (4, 5)


@dataclass
class Reading:
    """Where the reading of a bundle stands: its phase, the once-only kinds seen, whether the
    trailer came, why the file is no bundle (its first line, told at the end), the hash of the
    lines so far, and the current line's bytes when they are canonical JSON (else None)."""

    phase: int = -1
    seen: set[str] = field(default_factory=set)
    trailer_seen: bool = False
    not_a_bundle: str | None = None
    stream_hash: Any = field(default_factory=hashlib.sha256)
    line: bytes | None = None

    def hash_line(self, raw: bytes) -> None:
        """Take a line into the stream's hash (every line before the trailer)."""
        self.stream_hash.update(raw + b"\n")

    def member_digest(self, key: bytes, follower: bytes, value: Any) -> str:
        """The digest of a member's value of the current line: cut from the line when the line
        is canonical (keys in order, the member followed by `follower`; a quote inside a string
        is escaped, so the key's first and the follower's last occurrence are the line's own),
        else canonicalized again."""
        line = self.line
        if line is not None:
            start, end = line.find(key), line.rfind(follower)
            if 0 <= start < end:
                return digest_of_bytes(line[start + len(key) : end])
        return digest_of(value)


def admit(
    reading: Reading,
    line_no: int,
    raw: bytes,
    data: bytes,
    value: Any,
    close_dataset: Callable[[], Iterator[Finding]],
) -> Generator[Finding, None, BundleLine | MalformedCase | None]:
    """Admit a parsed line (`raw` as read, `data` without a leading BOM): yield each fault,
    and return the line as its typed value, or None when its checks may not run (line 1 that
    shows no bundle is told through `reading`). `close_dataset` yields what ends a dataset."""
    kind = value.get("kind") if type(value) is dict else None
    if line_no == 1 and (kind != "header" or value.get("format") != FORMAT):
        reading.not_a_bundle = f"line 1 is not a {FORMAT} header"
        return None
    if kind != "trailer":
        reading.hash_line(raw)
    if type(kind) is not str or kind not in PHASES:
        yield failure(line_no, "unknown_kind", f"unknown line kind {kind!r}")
        return None
    reading.line = data if canonical_bytes(value) == data else None
    if reading.line is None:
        yield failure(line_no, "not_canonical", f"the {kind} line is not canonical JSON")
    unknown = sorted(set(value) - ALLOWED[kind])
    if unknown:
        yield failure(line_no, "unknown_field", f"the {kind} line has unknown fields {unknown}")
    if kind in ONCE:
        if kind in reading.seen:
            yield failure(line_no, "duplicate", f"a second {kind} line")
            return None
        reading.seen.add(kind)
    yield from _enter_phase(reading, line_no, kind, close_dataset)
    return (yield from _typed(reading, line_no, kind, value))


def _enter_phase(
    reading: Reading,
    line_no: int,
    kind: str,
    close_dataset: Callable[[], Iterator[Finding]],
) -> Iterator[Finding]:
    """Move to the kind's phase of the bundle (a dataset's examples end when it is left)."""
    phase = PHASES[kind]
    if phase < reading.phase:
        yield failure(line_no, "order", f"a {kind} line out of the bundle's order")
    elif phase > reading.phase and reading.phase in _EXAMPLES_END:
        yield from close_dataset()
    reading.phase = max(reading.phase, phase)


def _typed(
    reading: Reading, line_no: int, kind: str, value: dict[str, Any]
) -> Generator[Finding, None, BundleLine | MalformedCase | None]:
    """The line's required fields and their types; return its typed value when both hold."""
    missing = [name for name in REQUIRED[kind] if name not in value]
    if missing:
        yield failure(line_no, "malformed", f"the {kind} line lacks {', '.join(missing)}")
        if kind == "trailer":
            reading.trailer_seen = True
        return None
    mistyped = line_problem(kind, value)
    if mistyped is not None:
        yield failure(line_no, "malformed", mistyped)
        return None
    line: BundleLine | MalformedCase = decoded(kind, value)
    return line
