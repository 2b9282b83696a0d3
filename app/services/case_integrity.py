"""A stored report's cases trees, proven again from the case rows: each tree's count and root
re-hashed from the rows' columns (never from the stored leaf) and each stored output against
its digest. app/services/integrity.py puts these findings beside the report's others."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.digest import merkle
from app.digest.sha256 import short_digests
from app.repositories import integrity as repo

# Case rows hashed per batch in a worker thread: the event loop serves requests meanwhile.
ROWS_PER_BATCH = 20_000


@dataclass(frozen=True)
class Finding:
    """One part of a stored report that no longer proves what it should."""

    part: str
    detail: str

    def __str__(self) -> str:
        return f"{self.part}: {self.detail}"


def leaves_and_outputs(
    rows: Sequence[Mapping[Any, Any]], scorer_digests: Mapping[str, str | None]
) -> tuple[bytes, list[str]]:
    """Leaf hashes re-made from the columns (joined, 32 bytes each), and the cases whose stored
    output (text or bytes) no longer hashes to their output digest. Both hashed in batches."""
    output_digests = [row["output_digest"] for row in rows]
    leaves = merkle.column_leaf_hashes(
        [row["example_id"] for row in rows],
        [row["repeat"] for row in rows],
        [row["status"] for row in rows],
        [row["score"] for row in rows],
        output_digests,
        [row["trace_digest"] for row in rows],
        [row["evidence_refs"] for row in rows],
        [row["assurance"] for row in rows],
        [scorer_digests.get(row["scorer_version"]) or "" for row in rows],
        _stored_measures(rows),
    )
    return b"".join(leaves), _forged_outputs(rows, output_digests)


def _stored_measures(rows: Sequence[Mapping[Any, Any]]) -> list[str | None] | None:
    """The rows' stored measures (the canonical JSON their leaves commit to), None when no row
    has any."""
    found = [row.get("measures") for row in rows]
    return None if all(m is None for m in found) else found


def _forged_outputs(rows: Sequence[Mapping[Any, Any]], digests: list[str | None]) -> list[str]:
    """The cases whose stored output does not hash to its digest, as `example/repeat`."""
    outputs = [row["output"] for row in rows]
    checked = [
        i
        for i, (output, digest) in enumerate(zip(outputs, digests, strict=True))
        if output and digest
    ]
    if not checked:
        return []
    computed = short_digests(_as_bytes([outputs[i] for i in checked]))
    # Compared all at once: one string of every computed digest against one of the stored.
    stored = "".join(str(digests[i])[7:] for i in checked)
    if b"".join(computed).hex() == stored and all(
        str(digests[i]).startswith("sha256:") for i in checked
    ):
        return []
    return [
        f"{rows[i]['example_id']}/{rows[i]['repeat']}"
        for i, digest in zip(checked, computed, strict=True)
        if digests[i] != "sha256:" + digest.hex()
    ]


def _as_bytes(data: list[Any]) -> list[bytes]:
    """Stored outputs (text or bytes) as bytes, without a copy when all are bytes already."""
    if all(isinstance(output, bytes) for output in data):
        return data
    return [o.encode() if isinstance(o, str) else o for o in data]


def outputs_finding(label: str, forged: list[str]) -> Finding:
    """Stored outputs that differ from their digests, the first five named."""
    shown = ", ".join(forged[:5]) + (" …" if len(forged) > 5 else "")
    return Finding(
        "outputs", f"{label}: {len(forged)} stored outputs differ from their digest ({shown})"
    )


def root_findings(label: str, leaves: bytes, committed: Mapping[str, Any]) -> list[Finding]:
    """A whole check's leaves against the count and root the report bound."""
    stored = len(leaves) // 32
    if stored != committed.get("count"):
        return [Finding("cases", f"{label}: {stored} cases stored, {committed.get('count')} bound")]
    if merkle.hex_digest(merkle.root_of_joined(leaves)) != committed.get("root"):
        return [Finding("cases", f"{label}: the case rows no longer hash to the bound root")]
    return []


@dataclass(frozen=True)
class CommittedTree:
    """A cases tree a report binds: whose cases (evaluation, check, and `kind`: a bundle's
    `case` or `baseline_case`), its count and root."""

    evaluation_id: str
    check_id: str
    committed: dict[str, Any]
    scorer_name: str
    kind: str = "case"

    @property
    def label(self) -> str:
        """How findings name the tree."""
        return self.check_id if self.kind == "case" else f"{self.check_id} (baseline)"


def committed_trees(evaluation_id: uuid.UUID, body: dict[str, Any]) -> list[CommittedTree]:
    """Every check's cases tree the body binds, and a comparison's baseline tree."""
    found: list[CommittedTree] = []
    for check in body.get("checks") or []:
        if not isinstance(check, dict) or not isinstance(check.get("cases"), dict):
            continue
        if "measure" in check:
            # Its trees are those of the check it measures (measured_findings).
            continue
        scorer = str((check.get("scorer_ref") or {}).get("name"))
        check_id = str(check.get("check_id"))
        found.append(CommittedTree(str(evaluation_id), check_id, check["cases"], scorer))
        comparison = check.get("comparison")
        if isinstance(comparison, dict) and isinstance(comparison.get("baseline_cases"), dict):
            found.append(
                CommittedTree(
                    str(comparison.get("baseline_evaluation_id")),
                    check_id,
                    comparison["baseline_cases"],
                    scorer,
                    "baseline_case",
                )
            )
    return found


async def tree_findings(
    session: AsyncSession, tree: CommittedTree, scorer_digests: Mapping[str, str | None]
) -> list[Finding]:
    """One check's cases root and count, recomputed from its rows' columns (never from the
    stored leaf), and its stored outputs against their digests."""
    # The leaf hashes joined (32 bytes each), not a bytes object per case: a check of ten
    # million cases holds 320 MB rather than twice that.
    leaves = bytearray()
    forged: list[str] = []
    count = tree.committed.get("count")
    if isinstance(count, int) and count <= ROWS_PER_BATCH:
        # A small check: one round trip, hashed on the loop (a thread hand-off costs more).
        rows = await repo.case_rows(session, tree.evaluation_id, tree.check_id)
        more, forged = leaves_and_outputs(rows, scorer_digests)
        leaves += more
    else:
        batches = repo.case_row_batches(session, tree.evaluation_id, tree.check_id, ROWS_PER_BATCH)
        async for batch in batches:
            more, bad = await asyncio.to_thread(leaves_and_outputs, batch, scorer_digests)
            leaves += more
            forged += bad
    found = [outputs_finding(tree.label, forged)] if forged else []
    if len(leaves) <= 32 * ROWS_PER_BATCH:
        return found + root_findings(tree.label, bytes(leaves), tree.committed)
    return found + await asyncio.to_thread(root_findings, tree.label, bytes(leaves), tree.committed)
