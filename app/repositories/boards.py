"""Boards' rows: the current gate reports of a suite version a board ranks (one per subject),
and the stored boards, appended to the log by the owner's function."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import astuple, dataclass, fields
from datetime import datetime
from typing import Any

from app.platform.db import ReadConnection, WriteConnection

CURRENT_SQL = """
SELECT r.id, r.evaluation_id, r.subject_digest, r.digest, r.body
FROM reports r JOIN report_envelopes e ON e.report_id = r.id
WHERE r.project_id = $1 AND r.suite_version_id = $2 AND r.mode = 'gate'
  AND e.status = 'current'
  AND ($3::text[] IS NULL OR r.subject_digest = ANY($3::text[]))
ORDER BY r.subject_digest
"""


@dataclass(frozen=True)
class CurrentReport:
    """A subject's current gate report under the suite version."""

    report_id: uuid.UUID
    evaluation_id: uuid.UUID
    subject_digest: str
    digest: str
    body: bytes


async def current_gate_reports(
    reader: ReadConnection,
    project_id: uuid.UUID,
    suite_version_id: uuid.UUID,
    subjects: list[str] | None,
) -> list[CurrentReport]:
    """The current gate report of each subject (of `subjects`, or every one) under the suite
    version, by subject digest (at most one each: supersession keeps one current)."""
    rows = await reader.fetch(CURRENT_SQL, project_id, suite_version_id, subjects)
    return [CurrentReport(*row) for row in rows]


@dataclass(frozen=True)
class StoredBoard:
    """A stored board: what it ranks, its canonical body and digest, its signed envelope."""

    id: uuid.UUID
    project_id: uuid.UUID
    suite_id: uuid.UUID
    suite_version_id: uuid.UUID
    check_id: str
    subjects: int
    body: bytes
    digest: str
    keyid: str
    envelope: bytes
    attestation_digest: str
    created_at: datetime


COLUMNS = ", ".join(field.name for field in fields(StoredBoard))


async def insert(connection: WriteConnection, board: StoredBoard) -> None:
    """Store a board (never changed after: the table is append-only)."""
    await connection.execute(
        f"INSERT INTO boards ({COLUMNS}) VALUES ({', '.join(f'${i + 1}' for i in range(12))})",
        *astuple(board),
    )


async def append_to_log(connection: WriteConnection, board_id: uuid.UUID) -> int:
    """The board's entry appended to the transparency log by the owner's function (which
    computes it from the stored row and holds the append lock until the transaction ends)."""
    index: int = await connection.fetchval("SELECT evalbook_log_append_boards($1)", [board_id])
    return index


async def get(
    reader: ReadConnection, project_id: uuid.UUID, board_id: uuid.UUID
) -> StoredBoard | None:
    """A board of the project, or None (another project's board is not found)."""
    row = await reader.fetchrow(
        f"SELECT {COLUMNS} FROM boards WHERE id = $1 AND project_id = $2", board_id, project_id
    )
    return None if row is None else StoredBoard(*row)


async def page(
    reader: ReadConnection,
    project_id: uuid.UUID,
    suite_id: uuid.UUID | None,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[StoredBoard]:
    """Boards of the project (of one suite when named), newest first, `limit` after `after`."""
    rows = await reader.fetch(
        f"SELECT {COLUMNS} FROM boards WHERE project_id = $1"
        " AND ($2::uuid IS NULL OR suite_id = $2)"
        " AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4))"
        " ORDER BY created_at DESC, id DESC LIMIT $5",
        project_id,
        suite_id,
        None if after is None else after[0],
        None if after is None else after[1],
        limit,
    )
    return [StoredBoard(*row) for row in rows]


async def of_suite_named(
    reader: ReadConnection, project_id: uuid.UUID, suite: str, limit: int
) -> list[StoredBoard]:
    """The newest boards of the project's suite of this name."""
    rows = await reader.fetch(
        f"SELECT {', '.join('b.' + f.name for f in fields(StoredBoard))} FROM boards b"
        " JOIN suites s ON s.id = b.suite_id"
        " WHERE b.project_id = $1 AND s.name = $2 ORDER BY b.created_at DESC, b.id DESC LIMIT $3",
        project_id,
        suite,
        limit,
    )
    return [StoredBoard(*row) for row in rows]


async def subjects_of_reports(
    reader: ReadConnection, report_ids: list[uuid.UUID]
) -> dict[uuid.UUID, Any]:
    """Each report's subject (the object its body names), by report id."""
    rows = await reader.fetch(
        "SELECT id, convert_from(body, 'UTF8')::json -> 'subject' FROM reports"
        " WHERE id = ANY($1::uuid[])",
        report_ids,
    )
    return {row[0]: row[1] for row in rows}


# A check's cases in case order, with the columns a case record is made of (no output).
RECORDS_SQL = """
SELECT example_id, repeat, status, score, output_digest, trace_digest, evidence_refs,
       assurance, scorer_version, measures
FROM cases WHERE evaluation_id = $1 AND check_id = $2 ORDER BY example_id, repeat
"""


async def case_record_batches(
    reader: ReadConnection, evaluation_id: uuid.UUID, check_id: str, size: int
) -> AsyncIterator[list[Any]]:
    """A check's case rows (RECORDS_SQL) in batches of `size`, through a server-side cursor
    (the reader's connection holds a transaction while it reads)."""
    async with reader.transaction():
        cursor = await reader.cursor(RECORDS_SQL, evaluation_id, check_id)
        while batch := await cursor.fetch(size):
            yield batch


async def reports_for_bundle(
    reader: ReadConnection, project_id: uuid.UUID, report_ids: list[uuid.UUID]
) -> dict[uuid.UUID, Any]:
    """Each report's evaluation, digest, body and DSSE envelope (or None), by report id."""
    rows = await reader.fetch(
        "SELECT r.id, r.evaluation_id, r.digest, r.body, a.envelope, a.keyid FROM reports r"
        " LEFT JOIN report_attestations a ON a.report_id = r.id"
        " WHERE r.project_id = $1 AND r.id = ANY($2::uuid[])",
        project_id,
        report_ids,
    )
    return {row["id"]: row for row in rows}
