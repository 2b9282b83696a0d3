"""Case ingestion through COPY into a per-transaction staging table."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.services.case_rows import STAGING_COLUMNS

_COMPARED = (
    "status",
    "score",
    "output_digest",
    "evidence_refs",
    "trace_id",
    "trace_digest",
    "scorer_version",
    "assurance",
)
_CASE_COLUMNS = ", ".join(STAGING_COLUMNS[1:])

CREATE_STAGING = """
CREATE TEMP TABLE case_staging (
    line integer NOT NULL,
    evaluation_id uuid NOT NULL,
    check_id text COLLATE "C" NOT NULL,
    example_id text COLLATE "C" NOT NULL,
    repeat integer NOT NULL,
    status text NOT NULL,
    score double precision,
    output text,
    output_digest text,
    output_key text,
    evidence_refs text[],
    trace_id text,
    trace_digest text,
    scorer_version text COLLATE "C" NOT NULL,
    scorer_digest text NOT NULL,
    assurance text NOT NULL
) ON COMMIT DROP
"""

MERGE = f"""
INSERT INTO cases ({_CASE_COLUMNS})
SELECT {_CASE_COLUMNS} FROM case_staging ORDER BY line
ON CONFLICT (evaluation_id, check_id, example_id, repeat) DO NOTHING
"""

FIRST_CONFLICT = f"""
SELECT s.line FROM case_staging s
JOIN cases c ON c.evaluation_id = s.evaluation_id AND c.check_id = s.check_id
    AND c.example_id = s.example_id AND c.repeat = s.repeat
WHERE ({", ".join("c." + c for c in _COMPARED)})
    IS DISTINCT FROM ({", ".join("s." + c for c in _COMPARED)})
ORDER BY s.line LIMIT 1
"""


async def _driver(session: AsyncSession) -> Any:
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    return raw.driver_connection


async def stage_and_merge(
    session: AsyncSession, rows: AsyncIterable[tuple[Any, ...]]
) -> tuple[int, int, int | None]:
    """COPY rows into staging, insert the new ones; (staged, inserted, first conflicting line)."""
    driver = await _driver(session)
    await driver.execute(CREATE_STAGING)
    await driver.copy_records_to_table("case_staging", records=rows, columns=STAGING_COLUMNS)
    staged = await driver.fetchval("SELECT count(*) FROM case_staging")
    status = await driver.execute(MERGE)
    inserted = int(status.rsplit(" ", 1)[-1])
    conflict = None
    if inserted < staged:
        conflict = await driver.fetchval(FIRST_CONFLICT)
    await driver.execute("DROP TABLE case_staging")
    return staged, inserted, conflict


async def counts_by_check(
    session: AsyncSession, evaluation_id: uuid.UUID
) -> dict[str, dict[str, int]]:
    """Cases received per check and status."""
    result = await session.execute(
        text(
            "SELECT check_id, status, count(*) FROM cases WHERE evaluation_id = :id "
            "GROUP BY check_id, status"
        ),
        {"id": evaluation_id},
    )
    counts: dict[str, dict[str, int]] = {}
    for check_id, status, count in result:
        counts.setdefault(check_id, {})[status] = count
    return counts
