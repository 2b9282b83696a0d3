"""Decoding finish's binary COPY streams: fixed-width rows, checked field by field, put in case
order; the evidence document numpy builds is the canonical JSON array of the digests."""

from __future__ import annotations

import struct

import numpy as np
import orjson
import pytest
import rfc8785

from app.repositories.case_columns import HAS_OUTPUT_DIGEST
from app.services.report_inputs import (
    COPY_HEADER,
    COPY_TRAILER,
    CopyFormatError,
    check_columns,
    decode_rows,
)


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


def test_rows_come_back_in_case_order_with_their_evidence_document() -> None:
    rows = [
        row(2, 0, HAS_OUTPUT_DIGEST, digest(3)),
        row(0, 1, 0, None),
        row(0, 0, HAS_OUTPUT_DIGEST, digest(1)),
        row(1, 0, HAS_OUTPUT_DIGEST, digest(2)),
    ]
    columns = check_columns(decode_rows(stream(*rows)), None)
    assert columns.example_index.tolist() == [0, 0, 1, 2]
    assert columns.repeat.tolist() == [0, 1, 0, 0]
    assert columns.has_output_digest.tolist() == [True, False, True, True]
    document = columns.evidence_document
    assert isinstance(document, bytes)
    assert document == rfc8785.dumps([digest(1), digest(2), digest(3)])
    assert orjson.loads(document) == [digest(1), digest(2), digest(3)]
    assert columns.evidence_total == 3
    assert np.isnan(columns.score).all()


def test_no_digest_makes_an_empty_document() -> None:
    columns = check_columns(decode_rows(stream(row(0, 0, 0, None))), None)
    assert columns.evidence_document == b"[]" and columns.evidence_total == 0


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
