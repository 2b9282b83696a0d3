"""Reading an evaluation's cases into columns for finishing: each check's cases by binary COPY,
decoded and hashed into its tree's root, on the read pool for a large suite, with the measures
its measure checks read."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation.inputs import CaseColumns
from app.domain.suites import scored_checks
from app.platform.db import ReadConnection, ReadPool, reading
from app.platform.tree_hashing import TreeHasher
from app.repositories import case_columns
from app.repositories.raw import driver_of
from app.services import report_measures

logger = logging.getLogger(__name__)

READ_STREAMS = 3
# Without the application's hasher (a caller outside the service), trees hash in a thread.
_THREAD_HASHER = TreeHasher(workers=0, min_leaves=0)


async def _read_check(
    connection: ReadConnection,
    evaluation_id: uuid.UUID,
    check: dict[str, Any],
    scorer_digests: dict[tuple[str, str], str],
    work_mem: str | None,
) -> tuple[np.ndarray, tuple[str, int] | None]:
    """One check's cases, decoded from a binary COPY stream (in a thread), and its SQL-joined
    evidence list when its cases carry trace digests or evidence refs."""
    from app.services import report_inputs

    data = await case_columns.copy_columns(
        connection,
        evaluation_id,
        check["check_id"],
        report_inputs.fresh_versions(check, scorer_digests),
        work_mem,
    )
    rows = await asyncio.to_thread(report_inputs.decode_rows, data)
    evidence = None
    if report_inputs.needs_joined_evidence(rows):
        evidence = await case_columns.evidence_document(
            connection, evaluation_id, check["check_id"]
        )
    return rows, evidence


async def _decoded(
    read: tuple[np.ndarray, tuple[str, int] | None], hasher: TreeHasher
) -> CaseColumns:
    """A check's columns (in a thread) and its tree's root (in a worker process when large)."""
    from app.services import report_inputs

    rows, evidence = read
    ordered, leaves = await asyncio.to_thread(report_inputs.ordered_with_leaves, rows)
    root = await hasher.root(leaves)
    del leaves
    return await asyncio.to_thread(report_inputs.check_columns, ordered, evidence, root)


@dataclass(frozen=True, slots=True)
class _Read:
    """One evaluation's read: its transaction, the suite, the scorers' digests, the hasher."""

    session: AsyncSession
    evaluation_id: uuid.UUID
    content: dict[str, Any]
    scorer_digests: dict[tuple[str, str], str]
    hasher: TreeHasher

    async def check(
        self, connection: ReadConnection, check: dict[str, Any], work_mem: str | None
    ) -> tuple[np.ndarray, tuple[str, int] | None]:
        """One check's rows and joined evidence (decoded into columns apart)."""
        return await _read_check(
            connection, self.evaluation_id, check, self.scorer_digests, work_mem
        )

    async def measures(
        self, connection: ReadConnection | None = None
    ) -> report_measures.MeasureStreams:
        """The measures the suite's measure checks read, on the transaction's connection."""
        if not report_measures.measures_named(self.content):
            return {}
        connection = connection or await driver_of(self.session)
        return await report_measures.measure_streams(connection, self.evaluation_id, self.content)


async def _pooled(
    read: _Read, checks: list[dict[str, Any]], pool: ReadPool, work_mem: str
) -> tuple[list[CaseColumns], report_measures.MeasureStreams]:
    """The checks read on the pool, READ_STREAMS scans at a time, and the measures meanwhile
    on the transaction's own connection, which the scans leave idle."""
    # A connection is handed back as soon as its check is read, so the scans go on while read
    # checks are decoded, and at most one more read check than there are scans waits for
    # decoding (memory stays bounded).
    scans = asyncio.Semaphore(READ_STREAMS)
    held = asyncio.Semaphore(READ_STREAMS + 1)

    async def one(check: dict[str, Any]) -> CaseColumns:
        async with held:
            async with scans, reading(pool) as connection:
                raw = await read.check(connection, check, work_mem)
            return await _decoded(raw, read.hasher)

    return await report_measures.alongside(asyncio.gather(*map(one, checks)), read.measures())


async def _in_transaction(
    read: _Read, checks: list[dict[str, Any]], work_mem: str | None
) -> tuple[list[CaseColumns], report_measures.MeasureStreams]:
    """The checks, then the measures, read on the transaction's own connection."""
    driver = await driver_of(read.session)
    columns = [
        await _decoded(await read.check(driver, check, work_mem), read.hasher) for check in checks
    ]
    return columns, await read.measures(driver)


async def read_cases(
    session: AsyncSession,
    reading_cases: CaseReading,
    evaluation_id: uuid.UUID,
    content: dict[str, Any],
    scorer_digests: dict[tuple[str, str], str],
    *,
    committed: bool,
    expected: int,
) -> dict[str, CaseColumns]:
    """Read an evaluation's cases, one check at a time. Committed cases (all of them once
    the evaluation is locked FOR UPDATE, except the `cancelled` ones a cancel just wrote) of
    a large enough suite (`reading_cases.pooled_from`) are read on several connections, so
    PostgreSQL scans on more than one core while the checks already read are decoded; a
    check with no case is left out."""
    checks = scored_checks(content)
    started = time.perf_counter()
    hasher = reading_cases.hasher or _THREAD_HASHER
    read = _Read(session, evaluation_id, content, scorer_digests, hasher)
    pool, pooled_from = reading_cases.reader_pool, reading_cases.pooled_from
    # A smaller suite is read on the transaction's own connection: a pooled read's own
    # transaction costs more round trips than a parallel scan saves.
    if committed and pool is not None and expected >= pooled_from:
        read_columns, streams = await _pooled(read, checks, pool, reading_cases.work_mem)
    else:
        # A suite this small sorts its checks' cases within the server's own work_mem: two
        # round trips fewer a check.
        small = None if expected < pooled_from else reading_cases.work_mem
        read_columns, streams = await _in_transaction(read, checks, small)
    columns = {
        check["check_id"]: check_columns
        for check, check_columns in zip(checks, read_columns, strict=True)
        if check_columns.size
    }
    await report_measures.attach_measures(streams, columns)
    logger.info("read cases into columns in %.2f s", time.perf_counter() - started)
    return columns


@dataclass(frozen=True, slots=True)
class CaseReading:
    """Where and how finishing reads cases: the reader pool (None: the session's connection),
    PostgreSQL's work_mem for the scans, the hasher of the cases trees, and the smallest
    suite (in expected cases) read on the pool."""

    reader_pool: ReadPool
    work_mem: str
    # None: hash in a thread of this process.
    hasher: TreeHasher | None
    pooled_from: int = 0
