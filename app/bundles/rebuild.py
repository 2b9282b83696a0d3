"""Digests rebuilt from a bundle's lines as they stream by: datasets and evidence lists."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from app.bundles.lines import DatasetVersionLine
from app.digest.canonical import DIGEST_PREFIX, canonical_bytes


class DatasetDigest:
    """A dataset version being read: its streamed digest and its examples."""

    def __init__(self, line_no: int, line: DatasetVersionLine) -> None:
        self.line_no = line_no
        self.line = line
        self.hash = hashlib.sha256(b'{"examples":[')
        self.count = 0
        self.last_id: bytes | None = None
        self.ids: list[str] = []
        self.tags: list[tuple[str, ...]] = []

    def add(self, example_id: str, body_digest: str, tags: list[str]) -> None:
        if self.count:
            self.hash.update(b",")
        self.hash.update(
            canonical_bytes({"id": example_id, "body_digest": body_digest, "tags": tags})
        )
        self.count += 1
        self.ids.append(example_id)
        self.tags.append(tuple(tags))

    def extend(self, records: bytes, ids: list[str], tags: list[list[str]]) -> None:
        """Add examples whose canonical records are given comma-separated, as `add` would."""
        if self.count:
            self.hash.update(b",")
        self.hash.update(records)
        self.count += len(ids)
        self.ids.extend(ids)
        self.tags.extend(map(tuple, tags))

    def digest(self) -> str:
        tail = canonical_bytes({"name": self.line.name, "version": self.line.version})
        self.hash.update(b"]," + tail[1:])
        return DIGEST_PREFIX + self.hash.hexdigest()


class EvidenceDigest:
    """A check's evidence list rebuilt from its case lines, as a streamed canonical array."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256(b"[")
        self.entries: list[str] = []
        self.total = 0

    def add(self, case: dict[str, Any]) -> None:
        entries = []
        if case.get("output_digest"):
            entries.append(case["output_digest"])
        if case.get("trace_ref"):
            entries.append(case["trace_ref"]["digest"])
        entries.extend(case.get("evidence_refs") or [])
        for entry in entries:
            if self.total:
                self.hash.update(b",")
            self.hash.update(orjson.dumps(entry))
            self.total += 1
            if len(self.entries) <= 20:
                self.entries.append(entry)

    def extend(self, entries: list[str]) -> None:
        """Add entries known to be digests (plain JSON strings), as `add` would one by one."""
        if not entries:
            return
        opening = b',"' if self.total else b'"'
        self.hash.update(opening + '","'.join(entries).encode() + b'"')
        self.total += len(entries)
        if len(self.entries) <= 20:
            self.entries.extend(entries[: 21 - len(self.entries)])

    def digest(self) -> str:
        self.hash.update(b"]")
        return DIGEST_PREFIX + self.hash.hexdigest()
