"""Decoding finish's binary COPY streams: fixed-width rows, checked field by field, put in case
order; the evidence document numpy builds is the canonical JSON array of the digests, and a
long one is kept only as the manifest's stored digests."""

from __future__ import annotations

import asyncio
import hashlib
import struct
import subprocess
import sys

import numpy as np
import orjson
import pytest
import rfc8785

from app.digest import merkle
from app.digest.manifest_digests import digests_of
from app.platform.tree_hashing import TreeHasher
from app.repositories.case_columns import HAS_OUTPUT_DIGEST
from app.services.report_inputs import (
    COPY_HEADER,
    COPY_TRAILER,
    CaseColumns,
    CopyFormatError,
    check_columns,
    decode_rows,
    evidence_document,
    in_case_order,
    joined_leaves,
)

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


def row(position: int, repeat: int, flags: int, digest: str | None) -> bytes:
    """One row as PostgreSQL's binary COPY writes COLUMNS_SQL's six fields."""
    text = (digest or "-" * 71).encode()
    return (
        struct.pack(">h", 6)
        + struct.pack(">ii", 4, position)
        + struct.pack(">ii", 4, repeat)
        + struct.pack(">id", 8, float("nan"))
        + struct.pack(">ih", 2, flags)
        + struct.pack(">i", 32)
        + bytes([position]) * 32
        + struct.pack(">i", 71)
        + text
    )


def stream(*rows: bytes) -> bytes:
    return COPY_HEADER + b"".join(rows) + COPY_TRAILER


def digest(n: int) -> str:
    return "sha256:" + f"{n:02x}" * 32


def columns_of(data: bytes) -> CaseColumns:
    """A check's columns as finish builds them: rows in case order, the root from their leaves."""
    ordered = in_case_order(decode_rows(data))
    return check_columns(ordered, None, merkle.root_of_joined(joined_leaves(ordered)))


def test_rows_come_back_in_case_order_with_their_evidence_document() -> None:
    rows = [
        row(2, 0, HAS_OUTPUT_DIGEST, digest(3)),
        row(0, 1, 0, None),
        row(0, 0, HAS_OUTPUT_DIGEST, digest(1)),
        row(1, 0, HAS_OUTPUT_DIGEST, digest(2)),
    ]
    columns = columns_of(stream(*rows))
    assert columns.example_index.tolist() == [0, 0, 1, 2]
    # Each row's leaf is its position repeated: the root is over the leaves in case order.
    assert columns.root == merkle.root([bytes([p]) * 32 for p in (0, 0, 1, 2)])
    assert columns.repeat.tolist() == [0, 1, 0, 0]
    assert columns.has_output_digest.tolist() == [True, False, True, True]
    listed = columns.evidence_list
    assert listed is not None and not listed.is_manifest
    assert listed.refs == [digest(1), digest(2), digest(3)]
    assert np.isnan(columns.score).all()


def test_the_evidence_document_is_the_canonical_array_of_the_digests() -> None:
    ordered = in_case_order(
        decode_rows(
            stream(
                row(1, 0, HAS_OUTPUT_DIGEST, digest(2)),
                row(0, 1, 0, None),
                row(0, 0, HAS_OUTPUT_DIGEST, digest(1)),
            )
        )
    )
    document = evidence_document(
        ordered["output_digest"], (ordered["flags"] & HAS_OUTPUT_DIGEST) != 0
    )
    assert document == rfc8785.dumps([digest(1), digest(2)])
    assert orjson.loads(document) == [digest(1), digest(2)]


def test_a_long_evidence_list_is_kept_as_the_stored_manifest_only() -> None:
    entries = [digest(n) for n in range(30)]
    columns = columns_of(
        stream(*(row(n, 0, HAS_OUTPUT_DIGEST, entry) for n, entry in enumerate(entries)))
    )
    listed = columns.evidence_list
    canonical = rfc8785.dumps(entries)
    assert listed is not None and listed.is_manifest
    assert listed.refs == ["sha256:" + hashlib.sha256(canonical).hexdigest()]
    # No JSON document is kept, only the 32-byte digests the manifest is stored as.
    assert listed.document is None and columns.evidence_document is None
    assert (
        listed.stored()
        == digests_of(canonical)
        == b"".join(bytes.fromhex(e.removeprefix("sha256:")) for e in entries)
    )


def test_joined_evidence_from_sql_is_settled_the_same_way() -> None:
    entries = [digest(n) for n in range(25)]
    ordered = in_case_order(decode_rows(stream(row(0, 0, 0, None))))
    joined = ",".join(f'"{e}"' for e in entries)
    listed = check_columns(ordered, (joined, 25), b"\0" * 32).evidence_list
    assert listed is not None and listed.is_manifest
    assert listed.refs == ["sha256:" + hashlib.sha256(rfc8785.dumps(entries)).hexdigest()]
    assert listed.stored() == digests_of(rfc8785.dumps(entries))


def test_no_digest_makes_an_empty_list() -> None:
    columns = columns_of(stream(row(0, 0, 0, None)))
    listed = columns.evidence_list
    assert listed is not None and listed.refs == [] and not listed.is_manifest


@pytest.mark.parametrize(
    "data",
    [
        b"",
        COPY_HEADER,
        stream(row(0, 0, 0, None))[:-3] + COPY_TRAILER,  # a cut row
        stream(row(0, 0, 0, None).replace(struct.pack(">h", 6), struct.pack(">h", 5), 1)),
        stream(row(0, 0, 0, None).replace(struct.pack(">i", 71), struct.pack(">i", -1))),
    ],
)
def test_anything_else_is_refused(data: bytes) -> None:
    with pytest.raises(CopyFormatError):
        decode_rows(data)


@pytest.mark.parametrize("workers", [0, 1, 2])
async def test_tree_roots_from_worker_processes_equal_the_reference(workers: int) -> None:
    hasher = TreeHasher(workers, min_leaves=2)
    await hasher.start()
    started = list(hasher._running)
    try:
        sizes = (0, 1, 2, 3, 7, 64, 1000, 4097)
        leaves = {size: [merkle.leaf_hash(b"case %d" % i) for i in range(size)] for size in sizes}
        roots = await asyncio.gather(*(hasher.root(b"".join(leaves[n])) for n in sizes))
        assert roots == [merkle.root(leaves[n]) for n in sizes]
        assert len(hasher._running) == workers
    finally:
        await hasher.close()
    # Each worker ended on its own when its input closed.
    assert [w.process.returncode for w in started] == [0] * workers


async def test_a_failed_worker_is_left_out_and_its_tree_hashed_in_a_thread() -> None:
    hasher = TreeHasher(1, min_leaves=2)
    await hasher.start()
    try:
        (worker,) = hasher._running
        worker.process.kill()
        await worker.process.wait()
        leaves = [merkle.leaf_hash(b"case %d" % i) for i in range(5)]
        assert await hasher.root(b"".join(leaves)) == merkle.root(leaves)
        assert hasher._running == []
        assert await hasher.root(b"".join(leaves)) == merkle.root(leaves)
    finally:
        await hasher.close()


def test_the_worker_program_answers_each_tree_until_its_input_ends() -> None:
    trees = [[merkle.leaf_hash(b"%d/%d" % (n, i)) for i in range(n)] for n in (3, 0, 17)]
    request = b"".join(len(b"".join(t)).to_bytes(8, "big") + b"".join(t) for t in trees)
    done = subprocess.run(
        [sys.executable, "-m", "app.platform.tree_hashing"],
        input=request,
        capture_output=True,
        check=True,
    )
    assert done.stdout == b"".join(merkle.root(t) for t in trees)
