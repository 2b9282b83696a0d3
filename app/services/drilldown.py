"""What the drill-down pages read: a check's cases a page at a time, one example across a
report's checks, and the reports an example or a report is compared with."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import NotFound
from app.identity.auth import Principal
from app.platform.db import ReadPool
from app.repositories import case_diffs as case_repo
from app.repositories import raw, reads
from app.repositories.raw import driver_of
from app.services.diffs import DiffCache, load_side, report_diff
from app.services.kit.compiled import SuiteCache
from app.services.kit.cursors import case_after, case_cursor

CASES_PER_PAGE = 50


@dataclass(frozen=True)
class Neighbours:
    """The reports a report is compared with: its baseline's, those it superseded, and the one
    that superseded it."""

    baseline_evaluation: str | None = None
    baseline_report: str | None = None
    supersedes: list[str] = field(default_factory=list)
    superseded_by: str | None = None


async def neighbours(
    session: AsyncSession,
    principal: Principal,
    body: dict[str, Any],
    supersedes: list[str],
    superseded_by: str | None,
) -> Neighbours:
    """A report's neighbours: its baseline (evaluation and report, looked up here) and the
    supersessions the caller already read."""
    baseline = next(
        (
            (c.get("comparison") or {}).get("baseline_evaluation_id")
            for c in body.get("checks", [])
            if (c.get("comparison") or {}).get("baseline_evaluation_id")
        ),
        None,
    )
    baseline_report = None
    if baseline is not None:
        connection = await raw.read_connection(session)
        found = await reads.stored_for_evaluation(
            connection, principal.project_id, uuid.UUID(baseline)
        )
        baseline_report = None if found is None else str(found.id)
    return Neighbours(baseline, baseline_report, supersedes, superseded_by)


async def own_scores(
    session: AsyncSession,
    principal: Principal,
    suites: SuiteCache,
    diffs: DiffCache,
    reader_pool: ReadPool,
    report_id: uuid.UUID,
    near: Neighbours,
) -> dict[str, dict[str, float | None]]:
    """A comparative report's own scores beside the baseline's, by check (and "check/slice"),
    from its diff against the baseline's report; empty for a report that compares nothing."""
    if near.baseline_report is None:
        return {}
    found = await report_diff(
        session,
        principal,
        suites,
        diffs,
        report_id,
        uuid.UUID(near.baseline_report),
        reader_pool,
    )
    scores: dict[str, dict[str, float | None]] = {}
    for check_id, check in found.checks.items():
        scores[check_id] = check.answer["own_score"]
        for item in check.answer["slices"]:
            scores[f"{check_id} / {item['name']}"] = item["own_score"]
    return scores


@dataclass
class CasesPage:
    """A page of a check's cases, with the filters that chose them."""

    report_id: str
    body: dict[str, Any]
    check: dict[str, Any]
    definition: dict[str, Any]
    rows: list[Any]
    next_cursor: str | None
    with_output: bool
    filters: dict[str, Any]
    flaky: set[str]


def _check_with_cases(
    body: dict[str, Any], checks: Any, report_id: uuid.UUID, check_id: str
) -> dict[str, Any]:
    """The report's check that has cases of its own, or 404 saying why not."""
    check: dict[str, Any] | None = next(
        (c for c in body["checks"] if c["check_id"] == check_id), None
    )
    if check is not None and check.get("measure"):
        of = check["measure"]["of"]
        raise NotFound(
            f"{check_id!r} is a measure check: its cases, with their measures, are those of "
            f"{of!r} (/reports/{report_id}/checks/{of})"
        )
    if check is None or check_id not in checks:
        raise NotFound(f"the report has no check {check_id!r}")
    return check


async def check_cases(
    session: AsyncSession,
    principal: Principal,
    suites: SuiteCache,
    report_id: uuid.UUID,
    check_id: str,
    *,
    status: str | None,
    flaky: bool,
    tag: str | None,
    example_id: str | None,
    cursor: str | None,
) -> CasesPage:
    """A page of one check's cases in (example, repeat) order, filtered."""
    side, datasets = await load_side(session, principal, suites, report_id)
    check = _check_with_cases(side.body, side.checks, report_id, check_id)
    after = None if cursor is None else case_after(cursor)
    connection = await driver_of(session)
    with_output = principal.has("dataset.read_body")
    flaky_ids: list[str] = []
    if flaky:
        flaky_ids = await case_repo.flaky_examples(connection, side.evaluation_id, check_id)
    rows = await case_repo.cases_page(
        connection,
        side.evaluation_id,
        check_id,
        after=after,
        status=status,
        example_ids=flaky_ids if flaky else ([example_id] if example_id else None),
        tag=tag,
        dataset_version_id=side.checks[check_id].dataset_version_id,
        limit=CASES_PER_PAGE + 1,
        with_output=with_output,
    )
    following = None
    if len(rows) > CASES_PER_PAGE:
        rows = rows[:CASES_PER_PAGE]
        following = case_cursor(rows[-1]["example_id"], rows[-1]["repeat"])
    del datasets
    observed: dict[str, Any] = next(
        (o for o in check.get("observations") or [] if o.get("code") == "flaky_examples"), {}
    )
    marked = set(flaky_ids) | set(observed.get("detail") or []) | _flaky_on_page(rows)
    return CasesPage(
        str(report_id),
        side.body,
        check,
        side.definitions[check_id],
        rows,
        following,
        with_output,
        {"status": status, "flaky": flaky, "tag": tag, "example_id": example_id},
        marked,
    )


def _flaky_on_page(rows: list[Any]) -> set[str]:
    statuses: dict[str, set[str]] = {}
    for row in rows:
        statuses.setdefault(row["example_id"], set()).add(row["status"])
    return {e for e, seen in statuses.items() if {"pass", "fail"} <= seen}
