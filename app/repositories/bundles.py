"""Bundle records, and the streamed reads a bundle is built from (raw driver connection)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.digest.manifest_digests import document_of
from app.models import Bundle, Evaluation
from app.platform.db import ReadConnection
from app.repositories.keyset import newest_first

FETCH_ROWS = 1_000
# Bodies and outputs are read as their UTF-8 bytes: they are spliced into lines unchanged, so
# decoding them to str only to encode them again would be wasted work.

EXAMPLES_SQL = """
SELECT example_id, tags, body_digest, convert_to(body, 'UTF8') AS body,
       body_removed_at IS NOT NULL AS removed
FROM examples WHERE dataset_version_id = $1 ORDER BY example_id
"""
_CASE_COLUMNS = """
c.example_id, c.repeat, c.status, c.score,
convert_to(coalesce(c.output, o.output), 'UTF8') AS output,
c.output_digest, c.output_key, c.output_removed_at IS NOT NULL AS removed, c.evidence_refs,
c.trace_id, c.trace_digest, c.scorer_version, c.assurance, c.measures
"""
CASES_SQL = f"""
SELECT {_CASE_COLUMNS} FROM cases c
LEFT JOIN case_outputs o ON o.evaluation_id = c.evaluation_id AND o.check_id = c.check_id
    AND o.example_id = c.example_id AND o.repeat = c.repeat
WHERE c.evaluation_id = $1 AND c.check_id = $2 ORDER BY c.example_id, c.repeat LIMIT $3
"""
CASE_COUNTS_SQL = """
SELECT check_id, count(*)::int AS n FROM cases WHERE evaluation_id = $1 GROUP BY check_id
"""
RECORDED_COUNTS_SQL = """
SELECT c.check_id, c.case_count AS n FROM check_results c JOIN reports r ON r.id = c.report_id
WHERE r.evaluation_id = $1
"""
FIRST_LEFT_OUT_SQL = """
SELECT example_id, repeat FROM cases WHERE evaluation_id = $1 AND check_id = $2
ORDER BY example_id, repeat OFFSET $3 LIMIT 1
"""
LAST_SQL = """
SELECT example_id, repeat FROM cases WHERE evaluation_id = $1 AND check_id = $2
ORDER BY example_id DESC, repeat DESC LIMIT 1
"""
MANIFEST_SQL = "SELECT digests FROM evidence_manifests WHERE report_id = $1 AND check_id = $2"


async def _batches(connection: ReadConnection, sql: str, *args: Any) -> AsyncIterator[list[Any]]:
    """Rows of a query in batches through a server-side cursor (inside the transaction).

    The next batch is already being fetched while the caller works on this one, so the
    database's work overlaps the service's."""
    cursor = await connection.cursor(sql, *args)
    pending = asyncio.ensure_future(cursor.fetch(FETCH_ROWS))
    try:
        while rows := await pending:
            pending = asyncio.ensure_future(cursor.fetch(FETCH_ROWS))
            yield rows
    finally:
        if not pending.done():
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending


def examples(connection: ReadConnection, dataset_version_id: uuid.UUID) -> AsyncIterator[list[Any]]:
    """A dataset version's examples in id order, in batches."""
    return _batches(connection, EXAMPLES_SQL, dataset_version_id)


def cases(
    connection: ReadConnection, evaluation_id: uuid.UUID, check_id: str, limit: int
) -> AsyncIterator[list[Any]]:
    """The first `limit` cases of one check in case order, in batches."""
    return _batches(connection, CASES_SQL, evaluation_id, check_id, limit)


async def case_counts(connection: ReadConnection, evaluation_id: uuid.UUID) -> dict[str, int]:
    """How many cases each check of a finished evaluation has: as recorded when its report
    was issued (cases never change after), else counted."""
    recorded = await connection.fetch(RECORDED_COUNTS_SQL, evaluation_id)
    if recorded and all(row["n"] is not None for row in recorded):
        return {row["check_id"]: row["n"] for row in recorded}
    rows = await connection.fetch(CASE_COUNTS_SQL, evaluation_id)
    return {row["check_id"]: row["n"] for row in rows}


async def left_out_bounds(
    connection: ReadConnection, evaluation_id: uuid.UUID, check_id: str, kept: int
) -> tuple[Any, Any]:
    """The first and last (example id, repeat) beyond the first `kept` cases of a check."""
    first = await connection.fetchrow(FIRST_LEFT_OUT_SQL, evaluation_id, check_id, kept)
    last = await connection.fetchrow(LAST_SQL, evaluation_id, check_id)
    return first, last


async def manifest(connection: ReadConnection, report_id: uuid.UUID, check_id: str) -> bytes | None:
    """A check's stored evidence manifest (canonical JSON array)."""
    digests: bytes | None = await connection.fetchval(MANIFEST_SQL, report_id, check_id)
    if digests is None:
        return None
    # A large check's document is tens of megabytes: written off the event loop.
    return await asyncio.to_thread(document_of, digests)


async def get_evaluation(session: AsyncSession, evaluation_id: uuid.UUID) -> Evaluation | None:
    """An evaluation by id."""
    return await session.get(Evaluation, evaluation_id)


async def insert_bundle(session: AsyncSession, values: dict[str, Any]) -> None:
    """Record a bundle whose object is complete."""
    await session.execute(insert(Bundle).values(**values))


async def get_bundle(
    session: AsyncSession, project_id: uuid.UUID, bundle_id: uuid.UUID
) -> Bundle | None:
    """One bundle record of a project."""
    result = await session.execute(
        select(Bundle).where(Bundle.id == bundle_id, Bundle.project_id == project_id)
    )
    return result.scalar_one_or_none()


async def list_page(
    session: AsyncSession,
    project_id: uuid.UUID,
    *,
    report_id: uuid.UUID | None,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[Bundle]:
    """Bundle records newest first (keyset on created_at, id); one extra row tells more."""
    query = select(Bundle).where(Bundle.project_id == project_id)
    if report_id is not None:
        query = query.where(Bundle.report_id == report_id)
    query = newest_first(query, Bundle.created_at, Bundle.id, after, limit + 1)
    return list((await session.execute(query)).scalars())
