"""Computing a board of the current gate reports of many subjects on one check of a suite
version (docs/boards.md): each subject's per-example values read from its report's cases as the
diff reads them (every repeat scored, the pass fraction or the mean or minimum score), then
ranked by `aggregation.boards`. Storing, signing and logging it: `services.board_issuance`."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation.boards import Board, Entrant, PairedTest, rank_board
from app.aggregation.diff import ExampleFacts
from app.aggregation.inputs import DatasetIndex
from app.domain.errors import NotFound, ValidationFailed
from app.domain.suites import CompiledCheck
from app.domain.vocabulary import PASS_FAIL_METHODS
from app.identity.auth import Principal
from app.platform.db import ReadPool, reading
from app.repositories import boards as repo
from app.repositories import case_diffs
from app.repositories import definitions as definition_repo
from app.repositories.boards import CurrentReport
from app.repositories.raw import read_connection
from app.services.diff_checks import example_facts_of
from app.services.kit.compiled import SuiteCache

MIN_SUBJECTS, MAX_SUBJECTS = 2, 200
# Reports whose cases are read at once (each on its own connection of the read pool).
READ_AT_ONCE = 4


def paired_test(check: CompiledCheck) -> PairedTest:
    """McNemar's exact test for pass/fail with one repeat; the paired t-test otherwise."""
    if check.method in PASS_FAIL_METHODS and check.repeats == 1:
        return "mcnemar_exact"
    return "paired_t"


def _refuse_subjects(subjects: list[str] | None, found: list[CurrentReport]) -> None:
    """422 for a duplicate, a subject without a current report, or too few or too many."""
    if subjects is not None:
        if len(set(subjects)) != len(subjects):
            raise ValidationFailed("subjects: each subject once")
        have = {r.subject_digest for r in found}
        missing = [s for s in subjects if s not in have]
        if missing:
            raise ValidationFailed(
                f"subjects without a current gate report under this suite version: "
                f"{', '.join(missing)}"
            )
    if not MIN_SUBJECTS <= len(found) <= MAX_SUBJECTS:
        raise ValidationFailed(
            f"a board ranks {MIN_SUBJECTS} to {MAX_SUBJECTS} subjects; {len(found)} have a "
            "current gate report"
        )


@dataclass(frozen=True)
class ComputedBoard:
    """A ranked board and what it is of: the suite (its id, and the reference the reports'
    bodies give its version) and the suite version's id."""

    board: Board
    suite_id: uuid.UUID
    suite_version_id: uuid.UUID
    suite_ref: dict[str, Any]


async def _values_of(
    pool: ReadPool, found: list[CurrentReport], dataset: DatasetIndex, check: CompiledCheck
) -> list[ExampleFacts]:
    """Each report's per-example values of the check, its cases read on the read pool
    READ_AT_ONCE reports at a time (issued cases never change, so any connection reads them
    as the board's transaction would; the database scans while this process decodes)."""
    turns = asyncio.Semaphore(READ_AT_ONCE)

    async def facts_of(report: CurrentReport) -> ExampleFacts:
        async with turns, reading(pool) as connection:
            rows = await case_diffs.narrow_columns(connection, report.evaluation_id, check.check_id)
        return example_facts_of(rows, dataset, check, check.method)

    return list(await asyncio.gather(*(facts_of(report) for report in found)))


async def compute_board(
    session: AsyncSession,
    principal: Principal,
    suites: SuiteCache,
    selection: tuple[str, str, str],
    subjects: list[str] | None,
    alpha: float,
    pool: ReadPool,
) -> ComputedBoard:
    """Rank the current gate reports of `selection` (suite, version, check id)."""
    suite_name, version, check_id = selection
    suite = await definition_repo.get_suite(session, principal.project_id, suite_name)
    suite_version = (
        None
        if suite is None
        else await definition_repo.get_suite_version(session, suite.id, version)
    )
    if suite_version is None:
        raise NotFound(f"no suite {suite_name!r} version {version!r} in this project")
    compiled = await suites.get(session, suite_version)
    check = compiled.checks.get(check_id)
    if check is None:
        raise ValidationFailed(f"check_id: {check_id!r} is not a check of this suite version")
    dataset = await suites.dataset(session, check.dataset_version_id)
    reader = await read_connection(session)
    found = await repo.current_gate_reports(
        reader, principal.project_id, suite_version.id, subjects
    )
    _refuse_subjects(subjects, found)
    entrants = []
    suite_ref: dict[str, Any] = {}
    values = await _values_of(pool, found, dataset, check)
    for report, facts in zip(found, values, strict=True):
        executed = np.flatnonzero(~np.isnan(facts.value))
        body = orjson.loads(report.body)
        suite_ref = body["suite_ref"]
        result = next(c for c in body["checks"] if c["check_id"] == check_id)
        entrants.append(
            Entrant(
                report.subject_digest,
                str(report.report_id),
                result["score"],
                # Examples named by their dataset position: one dataset, 4 bytes an example.
                executed.astype(np.int32),
                facts.value[executed],
                report.digest,
                result["interval"],
            )
        )
    board = rank_board(entrants, paired_test(check), alpha)
    return ComputedBoard(board, suite_version.suite_id, suite_version.id, suite_ref)
