"""The diff of two reports (docs/changes.md): checks matched by id, examples by id, each
example's transition, McNemar's exact test, the paired difference, and pages of the examples
behind each transition. Reports never change, so a diff is computed once and kept."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation.inputs import DatasetIndex
from app.domain.errors import NotFound, ValidationFailed
from app.identity.auth import Principal
from app.platform.db import ReadPool, reading
from app.repositories import case_diffs as repo
from app.repositories import evaluations as evaluation_repo
from app.repositories.raw import driver_of
from app.services import reports as report_service
from app.services.diff_checks import CheckDiff, Side, diff_check
from app.services.kit.compiled import SuiteCache, compiled_of
from app.services.kit.once import ComputedOnce
from app.services.label_diffs import label_changes
from app.services.measure_diffs import measure_changes

PAGE_LIMIT = 100
READ_STREAMS = 4


@dataclass
class ReportDiff:
    """Two reports compared: the matched checks and the unmatched ones."""

    after: Side
    before: Side
    checks: dict[str, CheckDiff]
    only_after: list[str]
    only_before: list[str]
    # Per measure check in both, the examples whose measure changed most.
    measures: list[dict[str, Any]] = field(default_factory=list)
    # Per check judged in both, how its human labels changed.
    labels: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The diff's answer: both reports, every matched check, the unmatched ones."""
        return {
            "after": self.after.reference(),
            "before": self.before.reference(),
            "checks": [c.answer for c in self.checks.values()],
            "unmatched_checks": {"only_after": self.only_after, "only_before": self.only_before},
            "measures": self.measures,
            "labels": self.labels,
        }

    def check(self, check_id: str) -> CheckDiff:
        """A matched check, or 404."""
        found = self.checks.get(check_id)
        if found is None:
            raise NotFound(f"check {check_id!r} is not in both reports")
        return found


class DiffCache(ComputedOnce[tuple[uuid.UUID, uuid.UUID, uuid.UUID], ReportDiff]):
    """The last few diffs computed, by (project, after, before)."""


async def load_side(
    session: AsyncSession, principal: Principal, suites: SuiteCache, report_id: uuid.UUID
) -> tuple[Side, dict[str, DatasetIndex]]:
    """A report of the caller's project with its compiled suite and its checks' datasets."""
    report = await report_service.get(session, principal, report_id)
    body = orjson.loads(report.body)
    evaluation = await evaluation_repo.get(
        session, principal.project_id, uuid.UUID(body["evaluation_id"])
    )
    if evaluation is None:
        raise NotFound("no such report")
    compiled = await compiled_of(session, suites, evaluation.suite_version_id)
    datasets = {
        check_id: await suites.dataset(session, check.dataset_version_id)
        for check_id, check in compiled.checks.items()
    }
    side = Side(
        report.id,
        report.digest,
        body,
        evaluation.id,
        compiled.checks,
        report.status,
        report.superseded_by,
        {c["check_id"]: c for c in compiled.content["checks"]},
    )
    return side, datasets


async def _diffs(
    session: AsyncSession,
    reader_pool: ReadPool | None,
    sides: tuple[Side, Side],
    datasets: tuple[dict[str, DatasetIndex], dict[str, DatasetIndex]],
    check_ids: list[str],
) -> dict[str, CheckDiff]:
    """Each matched check's diff. With a pool, checks are read on several connections at once
    and each is computed (in a thread) as soon as both its sides are read, so PostgreSQL's
    scans and the arithmetic overlap."""
    after, before = sides

    def compute(check_id: str, rows: tuple[np.ndarray, np.ndarray]) -> CheckDiff:
        sets = (datasets[1][check_id], datasets[0][check_id])
        return diff_check(after, before, check_id, rows, sets)

    if reader_pool is None:
        driver = await driver_of(session)
        found = {}
        for check_id in check_ids:
            rows = (
                await repo.narrow_columns(driver, before.evaluation_id, check_id),
                await repo.narrow_columns(driver, after.evaluation_id, check_id),
            )
            found[check_id] = await asyncio.to_thread(compute, check_id, rows)
        return found
    streams = asyncio.Semaphore(READ_STREAMS)

    async def read(evaluation_id: uuid.UUID, check_id: str) -> np.ndarray:
        async with streams, reading(reader_pool) as connection:
            return await repo.narrow_columns(connection, evaluation_id, check_id)

    async def one(check_id: str) -> CheckDiff:
        rows = await asyncio.gather(
            read(before.evaluation_id, check_id), read(after.evaluation_id, check_id)
        )
        return await asyncio.to_thread(compute, check_id, (rows[0], rows[1]))

    return dict(zip(check_ids, await asyncio.gather(*map(one, check_ids)), strict=True))


async def report_diff(
    session: AsyncSession,
    principal: Principal,
    suites: SuiteCache,
    cache: DiffCache,
    report_id: uuid.UUID,
    other_id: uuid.UUID,
    reader_pool: ReadPool | None = None,
) -> ReportDiff:
    """The diff of report `report_id` (after) against `other_id` (before), both of the
    caller's project; computed once, then kept."""
    if report_id == other_id:
        raise ValidationFailed(
            "a report diffed with itself changes nothing: name two different reports",
            errors=[{"loc": ["path", "other_id"], "msg": "the same report as report_id"}],
        )
    after, after_sets = await load_side(session, principal, suites, report_id)
    before, before_sets = await load_side(session, principal, suites, other_id)
    key = (principal.project_id, report_id, other_id)
    async with cache.lock(key):
        found = cache.get(key)
        if found is not None:
            return found
        before_ids = [c["check_id"] for c in before.body["checks"]]
        matched = [
            c["check_id"]
            for c in after.body["checks"]
            if c["check_id"] in before_ids and c["check_id"] in before.checks
        ]
        checks = await _diffs(
            session, reader_pool, (after, before), (after_sets, before_sets), matched
        )
        measures = await measure_changes(
            await driver_of(session), (after, before), (after_sets, before_sets)
        )
        labels = await label_changes(await driver_of(session), (after, before))
        compared = {*checks, *(m["check_id"] for m in measures)}
        found = ReportDiff(
            after,
            before,
            checks,
            [c["check_id"] for c in after.body["checks"] if c["check_id"] not in compared],
            [c for c in before_ids if c not in compared],
            measures,
            labels,
        )
        cache.keep(key, found)
        return found


def _record(row: Any, offset: int) -> dict[str, Any] | None:
    if row[offset] is None:
        return None
    record = dict(
        zip(repo.RECORD_FIELDS, row[offset : offset + len(repo.RECORD_FIELDS)], strict=True)
    )
    record["evidence_refs"] = record["evidence_refs"] or []
    return record


async def changed_case_lines(reader_pool: ReadPool, found: ReportDiff, check_id: str | None) -> Any:
    """One NDJSON line per case (of every matched check, or of one) whose status or score
    changed, with both records (null where a report has no such case)."""
    checks = [found.check(check_id).check_id] if check_id else list(found.checks)
    width = len(repo.RECORD_FIELDS)
    async with reading(reader_pool) as connection, connection.transaction(readonly=True):
        for check in checks:
            batches = repo.changed_cases(
                connection, found.after.evaluation_id, found.before.evaluation_id, check
            )
            async for batch in batches:
                yield b"".join(
                    orjson.dumps(
                        {
                            "check_id": check,
                            "example_id": row[0],
                            "repeat": row[1],
                            "before": _record(row, 2),
                            "after": _record(row, 2 + width),
                        },
                        option=orjson.OPT_APPEND_NEWLINE,
                    )
                    for row in batch
                )
