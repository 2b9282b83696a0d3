"""Case ingestion: COPY straight into `cases`, falling back to a staging merge on re-sends.

The common request carries only new cases, so each chunk is COPYed directly into `cases` (and
its inline outputs past 128 bytes into `case_outputs`) under a savepoint. When a chunk meets a
stored key (a retried batch, a duplicate inside the request, a concurrent identical batch) the
savepoint is rolled back and that chunk goes through a temporary staging table: `INSERT ...
SELECT ... ON CONFLICT DO NOTHING RETURNING` the new keys, whose long outputs are then written,
and a join that finds the first row whose content differs from the stored case.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg
from asyncpg.pgproto.pgproto import UUID as DriverUUID
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.ingestion import CaseRow, LongOutput
from app.models.evaluations import Case
from app.platform.db import WriteConnection
from app.repositories.raw import driver_of


def driver_uuid(value: uuid.UUID) -> uuid.UUID:
    """`value` as the driver's own UUID (a uuid.UUID subclass, equal and hashed alike), which
    its COPY encoder writes as it is: of a plain uuid.UUID it asks `.bytes`, a property that
    builds 16 bytes from an integer, once per row."""
    driver_uuid: uuid.UUID = DriverUUID(value.bytes)
    return driver_uuid


# The `cases` columns in the order rows are built and COPYed; the staging table leads with the
# request's line (or index) of each case.
CASE_COLUMNS = (
    "evaluation_id",
    "check_id",
    "example_id",
    "example_position",
    "repeat",
    "status",
    "score",
    "output",
    "output_digest",
    "output_key",
    "evidence_refs",
    "trace_id",
    "trace_digest",
    "scorer_version",
    "assurance",
    "leaf",
    "measures",
)
STAGING_COLUMNS = ("line", *CASE_COLUMNS)
OUTPUT_COLUMNS = ("evaluation_id", "check_id", "example_id", "repeat", "output")
# A batch is (line or index of each case, its `cases` row, the `case_outputs` rows of those
# with a long inline output), in request order.
Batch = tuple[Sequence[int], list[CaseRow], list[LongOutput]]
_COMPARED = (
    "status",
    "score",
    "output_digest",
    "evidence_refs",
    "trace_id",
    "trace_digest",
    "scorer_version",
    "assurance",
    "measures",
)
_COLUMN_LIST = ", ".join(CASE_COLUMNS)

# The staging table is `cases`' own columns (their types, collations and defaults) behind the
# request's line of each case.
CREATE_STAGING = """
CREATE TEMP TABLE IF NOT EXISTS case_staging (line integer NOT NULL, LIKE cases INCLUDING DEFAULTS)
ON COMMIT DROP
"""

MERGE = f"""
INSERT INTO cases ({_COLUMN_LIST})
SELECT {_COLUMN_LIST} FROM case_staging ORDER BY line
ON CONFLICT (evaluation_id, check_id, example_id, repeat) DO NOTHING
RETURNING evaluation_id, check_id, example_id, repeat
"""

_DIFFERING = ", ".join(f"CASE WHEN c.{c} IS DISTINCT FROM s.{c} THEN '{c}' END" for c in _COMPARED)
FIRST_CONFLICT = f"""
SELECT s.line, array_remove(ARRAY[{_DIFFERING}], NULL) AS differing FROM case_staging s
JOIN cases c ON c.evaluation_id = s.evaluation_id AND c.check_id = s.check_id
    AND c.example_id = s.example_id AND c.repeat = s.repeat
WHERE ({", ".join("c." + c for c in _COMPARED)})
    IS DISTINCT FROM ({", ".join("s." + c for c in _COMPARED)})
ORDER BY s.line LIMIT 1
"""


@dataclass
class IngestResult:
    """What a request's cases did: new rows, identical re-sends, the first conflicting line."""

    accepted: int = 0
    unchanged: int = 0
    conflict: int | None = None
    # The stored columns the conflicting case differs in.
    differing: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CaseChunk:
    """Cases written together: their request line numbers, their rows and their outputs."""

    lines: list[int]
    rows: list[CaseRow]
    outputs: list[LongOutput]


async def _merge_chunk(driver: WriteConnection, taken: CaseChunk, result: IngestResult) -> None:
    lines, chunk, outputs = taken.lines, taken.rows, taken.outputs
    await driver.execute(CREATE_STAGING)
    await driver.execute("TRUNCATE case_staging")
    await driver.copy_records_to_table(
        "case_staging",
        records=[(line, *row) for line, row in zip(lines, chunk, strict=True)],
        columns=STAGING_COLUMNS,
    )
    inserted = {tuple(row) for row in await driver.fetch(MERGE)}
    new_outputs = [row for row in outputs if row[:4] in inserted]
    # A case sent twice in one request is inserted once: so is its output.
    unique_outputs = list({row[:4]: row for row in new_outputs}.values())
    if unique_outputs:
        await driver.copy_records_to_table(
            "case_outputs", records=unique_outputs, columns=OUTPUT_COLUMNS
        )
    result.accepted += len(inserted)
    result.unchanged += len(chunk) - len(inserted)
    if len(inserted) < len(chunk):
        row = await driver.fetchrow(FIRST_CONFLICT)
        if row is not None:
            result.conflict, result.differing = row["line"], list(row["differing"])


async def _write_chunk(driver: WriteConnection, taken: CaseChunk, result: IngestResult) -> None:
    chunk, outputs = taken.rows, taken.outputs
    await driver.execute("SAVEPOINT case_chunk")
    try:
        await driver.copy_records_to_table("cases", records=chunk, columns=CASE_COLUMNS)
        if outputs:
            await driver.copy_records_to_table(
                "case_outputs", records=outputs, columns=OUTPUT_COLUMNS
            )
    except asyncpg.UniqueViolationError:
        await driver.execute("ROLLBACK TO SAVEPOINT case_chunk")
        await driver.execute("RELEASE SAVEPOINT case_chunk")
        await _merge_chunk(driver, taken, result)
        return
    await driver.execute("RELEASE SAVEPOINT case_chunk")
    result.accepted += len(chunk)


class CaseWriter:
    """Writes a request's validated rows in chunks, one chunk's COPY under way while the caller
    builds the next, and stops at the first chunk holding a conflicting re-send.

    The COPY runs on the request's connection: anything else the caller sends on it waits for
    `idle()` first.
    """

    def __init__(
        self, session: AsyncSession, chunk_rows: int, flush_seconds: float = math.inf
    ) -> None:
        self.session = session
        self.chunk_rows = chunk_rows
        # Rows held this long are written however few: a slow stream's transaction never
        # idles long enough for PostgreSQL to end it.
        self.flush_seconds = flush_seconds
        self._written_at = time.monotonic()
        self.result = IngestResult()
        self._driver: WriteConnection | None = None
        self._lines: list[int] = []
        self._chunk: list[CaseRow] = []
        self._outputs: list[LongOutput] = []
        self._writing: asyncio.Task[None] | None = None

    async def idle(self) -> None:
        """Wait until no chunk is being written (its failure is raised here)."""
        writing, self._writing = self._writing, None
        if writing is not None:
            await writing

    async def add(self, batch: Batch) -> bool:
        """Take a batch; False once a conflicting re-send has stopped the writing."""
        lines, rows, outputs = batch
        self._lines.extend(lines)
        self._chunk.extend(rows)
        self._outputs.extend(outputs)
        if len(self._chunk) >= self.chunk_rows or (
            self._chunk and time.monotonic() - self._written_at >= self.flush_seconds
        ):
            await self.idle()
            if self.result.conflict is not None:
                return False
            self._written_at = time.monotonic()
            self._writing = asyncio.create_task(self._write(self._take()))
        return True

    async def close(self) -> IngestResult:
        """Write what is left; the request's outcome."""
        await self.idle()
        if self.result.conflict is None and self._chunk:
            await self._write(self._take())
        return self.result

    async def abandon(self) -> None:
        """Let a chunk under way end (the request failed; its transaction rolls back)."""
        with contextlib.suppress(Exception):
            await self.idle()

    def _take(self) -> CaseChunk:
        taken = CaseChunk(self._lines, self._chunk, self._outputs)
        self._lines, self._chunk, self._outputs = [], [], []
        return taken

    async def _write(self, taken: CaseChunk) -> None:
        if self._driver is None:
            self._driver = await driver_of(self.session)
        await _write_chunk(self._driver, taken, self.result)


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


async def example_cases(
    session: AsyncSession, evaluation_id: uuid.UUID, check_id: str, example_id: str
) -> list[Case]:
    """One example's cases in a check, by repeat."""
    result = await session.execute(
        select(Case)
        .where(
            Case.evaluation_id == evaluation_id,
            Case.check_id == check_id,
            Case.example_id == example_id,
        )
        .order_by(Case.repeat)
    )
    return list(result.scalars())
