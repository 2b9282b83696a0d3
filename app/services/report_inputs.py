"""Turning stored cases into the aggregation engine's columns (finish)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from app.aggregation.inputs import CaseColumns, EvidenceList
from app.aggregation.manifest import MAX_EVIDENCE_REFS, settled_evidence_list
from app.digest.manifest_digests import manifest_of_digest_rows
from app.repositories.case_columns import (
    COPY_HEADER,
    COPY_TRAILER,
    DIGEST_CHARS,
    HAS_EVIDENCE_REFS,
    HAS_OUTPUT_DIGEST,
    HAS_TRACE_DIGEST,
    KEY_FIELDS,
    STALE,
    CopyFormatError,
    copy_rows,
)

__all__ = ["COPY_HEADER", "COPY_TRAILER", "CopyFormatError"]

_NO_EVIDENCE = np.empty(0, dtype=object)
_NO_COUNTS = np.empty(0, dtype=np.int32)
ROW = np.dtype(
    [
        *KEY_FIELDS,
        ("flags_length", ">i4"),
        ("flags", ">i2"),
        ("leaf_length", ">i4"),
        ("leaf", "V32"),
        ("output_length", ">i4"),
        ("output_digest", "u1", (DIGEST_CHARS,)),
    ]
)
_EXPECTED = {
    "fields": 6,
    "position_length": 4,
    "repeat_length": 4,
    "score_length": 8,
    "flags_length": 2,
    "leaf_length": 32,
    "output_length": DIGEST_CHARS,
}
ENTRY = DIGEST_CHARS + 3  # "sha256:<64 hex>",


def decode_rows(data: bytes | bytearray | memoryview) -> np.ndarray:
    """The rows of a binary COPY stream of `COLUMNS_SQL`, as one structured array (a view of
    `data`, not a copy)."""
    rows: np.ndarray = copy_rows(data, ROW)
    for name, expected in _EXPECTED.items():
        if rows.size and not (rows[name] == expected).all():
            raise CopyFormatError(f"unexpected {name}")
    return rows


def evidence_document(output_digest: np.ndarray, present: np.ndarray) -> bytes:
    """The evidence list of cases with no trace digest or evidence refs, as its canonical JSON
    array: each case's output digest, where `present`, as a JSON string, in case order."""
    chosen = output_digest[present]
    count = chosen.shape[0]
    if not count:
        return b"[]"
    document = np.empty(1 + count * ENTRY, dtype=np.uint8)
    document[0] = ord("[")
    entries = document[1:].reshape(count, ENTRY)
    entries[:, 0] = ord('"')
    entries[:, 1 : DIGEST_CHARS + 1] = chosen
    entries[:, DIGEST_CHARS + 1] = ord('"')
    entries[:, DIGEST_CHARS + 2] = ord(",")
    document[-1] = ord("]")  # in place of the last comma
    return document.tobytes()


def in_case_order(rows: np.ndarray) -> np.ndarray:
    """The rows sorted by (example position, repeat), the order of cases trees and evidence
    lists; rows read in storage order usually are already, which costs one comparison."""
    key = (rows["position"].astype(np.int64) << 32) | rows["repeat"].astype(np.int64)
    if key.size < 2 or bool((key[1:] > key[:-1]).all()):
        return rows
    return rows[np.argsort(key, kind="stable")]


def joined_leaves(rows: np.ndarray) -> bytes:
    """The leaf hashes of rows in case order (`in_case_order`), joined: what the tree's root is
    hashed from."""
    return rows["leaf"].tobytes()


def ordered_with_leaves(rows: np.ndarray) -> tuple[np.ndarray, bytes]:
    """The rows in case order and their joined leaf hashes."""
    ordered = in_case_order(rows)
    return ordered, joined_leaves(ordered)


def check_columns(rows: np.ndarray, evidence: tuple[str, int] | None, root: bytes) -> CaseColumns:
    """One check's CaseColumns from its decoded COPY rows (`decode_rows`) in case order
    (`in_case_order`) and its cases tree's root (hashed from `joined_leaves`). `evidence` is
    the SQL-joined evidence list (its entries joined by commas, and how many), read only when
    some case has a trace digest or evidence refs; the list is settled here (`EvidenceList`)."""
    flags = rows["flags"].astype(np.int16)
    has_output_digest = (flags & HAS_OUTPUT_DIGEST) != 0
    # Settled now, while the other checks are still read: a manifest is kept as its 32-byte
    # digests, not as its JSON (74 bytes a case, over 700 MB for ten million).
    if evidence is None:
        listed = _output_digest_list(rows["output_digest"], has_output_digest)
    else:
        joined, total = evidence
        listed = settled_evidence_list(("[" + joined + "]").encode(), total)
    return CaseColumns(
        example_index=rows["position"].astype(np.int32),
        repeat=rows["repeat"].astype(np.int32),
        status=(flags & 7).astype(np.int8),
        score=rows["score"].astype(np.float64),
        stale=(flags & STALE) != 0,
        assurance=((flags >> 3) & 7).astype(np.int8),
        has_output_digest=has_output_digest,
        evidence=_NO_EVIDENCE,
        evidence_count=_NO_COUNTS,
        evidence_list=listed,
        # Only the root is kept: the leaves are a third of a finish's memory at 10M cases.
        root=root,
    )


def _output_digest_list(output_digest: np.ndarray, present: np.ndarray) -> EvidenceList:
    """The evidence list of cases with no trace digest or evidence refs: their output digests
    in case order; a manifest is hashed and stored block by block, its document never whole."""
    total = int(present.sum())
    if total <= MAX_EVIDENCE_REFS:
        return settled_evidence_list(evidence_document(output_digest, present), total)
    chosen = output_digest if total == present.shape[0] else output_digest[present]
    digest, stored = manifest_of_digest_rows(chosen)
    return EvidenceList([digest], True, digests=stored)


def needs_joined_evidence(rows: np.ndarray) -> bool:
    """Whether any of a check's decoded rows has a trace digest or evidence refs (its evidence
    list is then joined by SQL)."""
    return bool((rows["flags"] & (HAS_TRACE_DIGEST | HAS_EVIDENCE_REFS)).any())


def fresh_versions(
    check: Mapping[str, Any], scorer_digests: Mapping[tuple[str, str], str]
) -> list[str]:
    """The scorer versions whose digest is the one a check pins (any other is stale)."""
    name, pinned = check["scorer"]["name"], check["scorer"]["digest"]
    return [v for (n, v), digest in scorer_digests.items() if n == name and digest == pinned]
