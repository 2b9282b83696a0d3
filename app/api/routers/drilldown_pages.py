"""The drill-down pages (HTML): two reports compared, a check's cases, one example, a suite's
history, an evaluation's examples to label, and the form that picks two reports to compare."""

from __future__ import annotations

import re
import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from app.aggregation.diff import TRANSITIONS
from app.api.deps import ReportReads, Session, State
from app.api.routers.pages import PageRoute, WebReader, reader
from app.api.web import compare_views, trends
from app.api.web.render import page
from app.api.web.session import BadForm
from app.api.web.views import when
from app.domain.identifiers import IDENTIFIER_RE
from app.domain.vocabulary import CASE_STATUSES
from app.schemas.common import Text
from app.services import board_issuance as board_service
from app.services import diffs as diff_service
from app.services import drilldown, example_pages
from app.services import history as history_service
from app.services import labels as label_service
from app.services.kit.cursors import example_after

router = APIRouter(include_in_schema=False, route_class=PageRoute)
Filter = Annotated[Text | None, Query(max_length=600)]
HISTORY_SHOWN = 200


def _identifier(value: str | None, name: str) -> str | None:
    if not value:
        return None
    if IDENTIFIER_RE.fullmatch(value) is None:
        raise BadForm(f"{name} must be an identifier (letters, digits, _ . : -)")
    return value


def _one_of(value: str | None, allowed: tuple[str, ...], name: str) -> str | None:
    if not value:
        return None
    if value not in allowed:
        raise BadForm(f"{name} must be one of {', '.join(allowed)}")
    return value


@router.get("/reports/{report_id}/compare/{other_id}")
async def compare_page(
    request: Request,
    report_id: uuid.UUID,
    other_id: uuid.UUID,
    session: Session,
    state: State,
    slice: Filter = None,
    transition: Filter = None,
    cursor: Filter = None,
) -> Response:
    """What changed from `other_id` (before) to `report_id` (after)."""
    me = await reader(request)
    chosen = _one_of(transition, TRANSITIONS, "transition")
    after_example = example_after(cursor) if cursor else None
    found = await diff_service.report_diff(
        session,
        me.principal,
        state.suite_cache,
        state.diffs,
        report_id,
        other_id,
        state.reader_pool,
    )
    view = compare_views.compare_view(found, _identifier(slice, "slice"), chosen, after_example)
    if slice and slice not in view.slice_names:
        known = ", ".join(view.slice_names) or "none"
        raise BadForm(f"these reports have no slice {slice!r} (slices: {known})")
    view.outputs = await example_pages.compared_outputs(
        session, me.principal, found, compare_views.listed_examples(view)
    )
    return page(request, "compare.html", {"me": me, "v": view})


@router.get("/compare")
async def compare_form(request: Request, after: Filter = None, before: Filter = None) -> Response:
    """The two reports a history's form picked, compared."""
    await reader(request)
    try:
        newer, older = uuid.UUID(after or ""), uuid.UUID(before or "")
    except ValueError:
        raise BadForm("pick two reports to compare") from None
    return RedirectResponse(f"/reports/{newer}/compare/{older}", status_code=303)


@router.get("/reports/{report_id}/checks/{check_id}")
async def check_cases_page(
    request: Request,
    report_id: uuid.UUID,
    check_id: str,
    session: Session,
    state: State,
    status: Filter = None,
    flaky: Filter = None,
    tag: Filter = None,
    example: Filter = None,
    cursor: Filter = None,
) -> Response:
    """A check's cases, a page at a time, filtered by status, flakiness, tag or example."""
    me = await reader(request)
    if flaky not in (None, "", "yes"):
        raise BadForm("flaky is yes or absent")
    if tag and (len(tag) > 200 or re.search(r"[\x00-\x1f]", tag)):
        raise BadForm("tag must be a printable tag of at most 200 characters")
    found = await drilldown.check_cases(
        session,
        me.principal,
        state.suite_cache,
        report_id,
        check_id,
        status=_one_of(status, CASE_STATUSES, "status"),
        flaky=flaky == "yes",
        tag=tag or None,
        example_id=_identifier(example, "example"),
        cursor=cursor or None,
    )
    return page(request, "check.html", {"me": me, "d": found, "statuses": CASE_STATUSES})


@router.get("/reports/{report_id}/examples/{example_id}")
async def example_page(
    request: Request,
    report_id: uuid.UUID,
    example_id: str,
    session: Session,
    state: State,
    against: Filter = None,
) -> Response:
    """One example: its input and expected answer, its outcome and repeats in every check,
    where else to see it; with `against`, another report's repeats beside them."""
    me = await reader(request)
    found = await example_pages.example_page(
        session, me.principal, state.suite_cache, report_id, example_id, _report_id(against)
    )
    return page(request, "example.html", {"me": me, "d": found})


@router.get("/evaluations/{evaluation_id}/labels")
async def labels_page(
    request: Request,
    evaluation_id: uuid.UUID,
    session: Session,
    state: State,
    cursor: Filter = None,
) -> Response:
    """The examples an evaluation's judged checks ask humans to label, a page at a time, with
    the input and the output the judge scored where the reader may see bodies."""
    me = await reader(request)
    found = await label_service.requested(
        session, me.principal, evaluation_id, state.suite_cache, cursor or None
    )
    bodies = me.principal.has("dataset.read_body")
    return page(request, "labels.html", {"me": me, "d": found, "bodies": bodies})


def _report_id(value: str | None) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise BadForm("against must be a report id") from None


@router.get("/suites/{name}/history")
async def history_page(
    request: Request,
    name: str,
    me: WebReader,
    reader_connection: ReportReads,
    check: Filter = None,
    limit: Filter = None,
) -> Response:
    """A suite's gate reports in issue order, each check's trend drawn."""
    suite = _identifier(name, "suite")
    assert suite is not None
    if limit and (not limit.isdigit() or not 1 <= int(limit) <= history_service.MAX_HISTORY):
        raise BadForm(f"limit is a whole number from 1 to {history_service.MAX_HISTORY}")
    shown = int(limit) if limit else HISTORY_SHOWN
    points = await history_service.suite_history(
        reader_connection, me.principal, suite, _identifier(check, "check"), shown
    )
    check_ids = list(dict.fromkeys(c for p in points for c in p.checks))
    drawn = [t for t in (trends.trend(c, points) for c in check_ids) if t is not None]
    boards = await board_service.suite_boards(reader_connection, me.principal, suite)
    return page(
        request,
        "history.html",
        {
            "me": me,
            "suite": suite,
            "points": points,
            "check_ids": check_ids,
            "trends": drawn,
            "shown": shown,
            "issued": [when(p.issued_at) for p in points],
            "boards": boards,
        },
    )
