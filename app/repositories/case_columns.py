"""Reading one check's cases for finish as typed binary columns (COPY ... FORMAT binary).

Each row is six fields of fixed width, so the whole answer decodes with one `np.frombuffer`:
the example's position (int4), the repeat (int4), the score (float8, NaN when none), a flags
word (int2: status code, assurance code, stale, and which digests and evidence are present),
the leaf (32 bytes), and the output digest as its 71 characters (a placeholder when absent).
A check whose cases carry trace digests or evidence refs has its evidence list joined by SQL.
Rows come in storage order (no sort on the server: the reader orders them) and outputs are
not read: they live in `case_outputs`, so the scan reads narrow rows.
"""

from __future__ import annotations

import uuid
from typing import Any

from app.domain.vocabulary import ASSURANCE_LEVELS, CASE_STATUSES
from app.platform.db import ReadConnection
from app.platform.memory import ReceiveBuffer

# Bits of the flags word above the status code (bits 0-2) and assurance code (bits 3-5).
STALE, HAS_OUTPUT_DIGEST, HAS_TRACE_DIGEST, HAS_EVIDENCE_REFS = 64, 128, 256, 512
DIGEST_CHARS = 71  # "sha256:" and 64 hex digits
_ABSENT = "'" + "-" * DIGEST_CHARS + "'"
_STATUS_CODE = " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(CASE_STATUSES))
_ASSURANCE_CODE = " ".join(f"WHEN '{a}' THEN {8 * i}" for i, a in enumerate(ASSURANCE_LEVELS))

COLUMNS_SQL = f"""
SELECT example_position, repeat, coalesce(score, 'NaN'::float8),
       (CASE status {_STATUS_CODE} END + CASE assurance {_ASSURANCE_CODE} END
        + CASE WHEN scorer_version = ANY($3::text[]) THEN 0 ELSE {STALE} END
        + CASE WHEN output_digest IS NULL THEN 0 ELSE {HAS_OUTPUT_DIGEST} END
        + CASE WHEN trace_digest IS NULL THEN 0 ELSE {HAS_TRACE_DIGEST} END
        + CASE WHEN coalesce(cardinality(evidence_refs), 0) = 0 THEN 0
               ELSE {HAS_EVIDENCE_REFS} END)::int2,
       leaf, coalesce(output_digest, {_ABSENT})
FROM cases WHERE evaluation_id = $1 AND check_id = $2
"""

# The evidence list of a check whose cases carry trace digests or evidence refs, joined in
# case order.
EVIDENCE_SQL = """
SELECT string_agg(
           nullif(concat_ws(',', '"' || output_digest || '"', '"' || trace_digest || '"',
                  CASE WHEN evidence_refs IS NOT NULL THEN nullif(array_to_string(ARRAY(
                      SELECT '"' || r || '"'
                      FROM unnest(evidence_refs) WITH ORDINALITY AS u(r, o) ORDER BY o
                  ), ','), '') END), ''),
           ',' ORDER BY example_id, repeat),
       sum((output_digest IS NOT NULL)::int + (trace_digest IS NOT NULL)::int
           + coalesce(cardinality(evidence_refs), 0))::int
FROM cases WHERE evaluation_id = $1 AND check_id = $2
"""


# PostgreSQL's binary COPY: a 19-byte header, then per row a field count and per field a
# length and the value (big-endian), then a two-byte trailer.
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
COPY_TRAILER = b"\xff\xff"


class CopyFormatError(ValueError):
    """A binary COPY stream that is not the rows a query of this module writes."""


# The first fields of a binary COPY row of (field count, position, repeat, score) as numpy reads
# it: each value after its length. Readers add their own fields after these.
KEY_FIELDS: list[tuple[str, str]] = [
    ("fields", ">i2"),
    ("position_length", ">i4"),
    ("position", ">i4"),
    ("repeat_length", ">i4"),
    ("repeat", ">i4"),
    ("score_length", ">i4"),
    ("score", ">f8"),
]


def copy_rows(data: bytes | bytearray | memoryview, row: Any) -> Any:
    """The rows of a binary COPY stream (no header extensions) as a structured array of the
    numpy dtype `row` (a view of `data`, not a copy); CopyFormatError for anything else."""
    import numpy as np

    whole = memoryview(data)
    if (
        len(whole) < len(COPY_HEADER) + len(COPY_TRAILER)
        or whole[: len(COPY_HEADER)] != COPY_HEADER
        or whole[len(whole) - len(COPY_TRAILER) :] != COPY_TRAILER
    ):
        raise CopyFormatError("not a binary COPY stream without header extensions")
    body = whole[len(COPY_HEADER) : len(whole) - len(COPY_TRAILER)]
    if len(body) % row.itemsize:
        raise CopyFormatError("rows of unexpected width")
    return np.frombuffer(body, dtype=row)


async def copy_columns(
    connection: ReadConnection,
    evaluation_id: uuid.UUID,
    check_id: str,
    fresh_versions: list[str],
    work_mem: str | None,
) -> memoryview:
    """One check's cases as a binary COPY stream (header and trailer included); `connection`
    is a raw driver connection. `work_mem` (None: the server's) is raised for this query alone,
    so that the bitmap of a large check's rows stays exact (no lossy pages to recheck)."""
    # One growing buffer rather than a list of chunks joined at the end: the join would hold
    # a large check's rows twice at once (tens of megabytes per scan in flight).
    data = ReceiveBuffer()

    async def take(chunk: bytes) -> None:
        data.extend(chunk)

    async def copy() -> None:
        if work_mem is not None:
            await connection.execute(f"SET LOCAL work_mem = '{work_mem}'")
        await connection.copy_from_query(
            COLUMNS_SQL, evaluation_id, check_id, fresh_versions, output=take, format="binary"
        )

    if connection.is_in_transaction():
        # Inside the finishing transaction (a cancel reads what it just wrote).
        await copy()
        if work_mem is not None:
            await connection.execute("SET LOCAL work_mem = DEFAULT")
    else:
        async with connection.transaction(readonly=True):
            await copy()
    return data.view()


async def evidence_document(
    connection: ReadConnection, evaluation_id: uuid.UUID, check_id: str
) -> tuple[str, int]:
    """A check's evidence list joined in case order, and its entry count."""
    row = await connection.fetchrow(EVIDENCE_SQL, evaluation_id, check_id)
    assert row is not None, "an aggregate over no rows still answers one row"
    return row[0] or "", row[1] or 0


# One measure of a check's cases, NaN where a case carries none, with each case's key.
MEASURE_SQL = """
SELECT example_position, repeat, coalesce((measures::json ->> $3)::float8, 'NaN'::float8)
FROM cases WHERE evaluation_id = $1 AND check_id = $2
"""


def measure_rows(data: bytes | bytearray | memoryview) -> Any:
    """The rows of a `copy_measure` stream: (position, repeat, value as `score`), a view."""
    import numpy as np

    return copy_rows(data, np.dtype(KEY_FIELDS))


async def copy_measure(
    connection: ReadConnection, evaluation_id: uuid.UUID, check_id: str, name: str
) -> memoryview:
    """One measure of a check's cases as a binary COPY stream of (position, repeat, value)."""
    data = ReceiveBuffer()

    async def take(chunk: bytes) -> None:
        data.extend(chunk)

    await connection.copy_from_query(
        MEASURE_SQL, evaluation_id, check_id, name, output=take, format="binary"
    )
    return data.view()
