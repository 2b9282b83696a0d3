"""What changed between two reports: the diff, a transition's examples, the changed cases."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Literal

import orjson
from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation.diff import TRANSITIONS
from app.api.access import ReportReader
from app.api.deps import Session, State
from app.api.routers.route import EdgeRoute
from app.api.state import AppState
from app.domain.errors import ValidationFailed
from app.domain.identifiers import IDENTIFIER_PATTERN
from app.identity.auth import Principal
from app.schemas.common import Cursor
from app.schemas.diffs import ReportDiffOut, TransitionPage
from app.schemas.problems import AUTHENTICATED, problems
from app.services import diffs as service
from app.services.kit.cursors import example_after

router = APIRouter(
    prefix="/evaluations/api", tags=["reports"], route_class=EdgeRoute, responses=AUTHENTICATED
)
DIFF = "/reports/{report_id:uuid}/diff/{other_id:uuid}"
Transition = Literal[TRANSITIONS]  # type: ignore[valid-type]
CheckId = Annotated[str | None, Query(pattern=IDENTIFIER_PATTERN, max_length=200)]


@dataclass(frozen=True, slots=True)
class DiffOf:
    """Two reports to compare (after, before) and what computing their diff needs."""

    session: AsyncSession
    principal: Principal
    state: AppState
    report_id: uuid.UUID
    other_id: uuid.UUID

    async def computed(self) -> service.ReportDiff:
        """The diff, computed or kept."""
        state = self.state
        return await service.report_diff(
            self.session,
            self.principal,
            state.suite_cache,
            state.diffs,
            self.report_id,
            self.other_id,
            state.reader_pool,
        )


def _diff_of(
    report_id: uuid.UUID,
    other_id: uuid.UUID,
    principal: ReportReader,
    session: Session,
    state: State,
) -> DiffOf:
    """What every diff endpoint declares: the two reports, a report reader, the session."""
    return DiffOf(session, principal, state, report_id, other_id)


Diffing = Annotated[DiffOf, Depends(_diff_of)]


@router.get(
    DIFF + ".ndjson",
    responses={
        200: {
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            "description": "one line per changed case: check, example, repeat, both records",
        },
        **problems(404, 422),
    },
)
async def changed_cases(diffing: Diffing, check: CheckId = None) -> StreamingResponse:
    """Every case whose status or score changed from `other_id` (before) to `report_id`."""
    found = await diffing.computed()
    if check is not None:
        found.check(check)
    return StreamingResponse(
        service.changed_case_lines(diffing.state.reader_pool, found, check),
        media_type="application/x-ndjson",
    )


@router.get(DIFF, response_model=ReportDiffOut | TransitionPage, responses=problems(400, 404, 422))
async def report_diff(
    diffing: Diffing,
    check: CheckId = None,
    transition: Annotated[Transition | None, Query(description="before-after")] = None,
    cursor: Annotated[Cursor | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=service.PAGE_LIMIT)] = service.PAGE_LIMIT,
) -> Response:
    """The diff of `report_id` (after) against `other_id` (before); with `check` and
    `transition`, a page of that transition's example ids."""
    if (check is None) != (transition is None):
        missing = "transition" if transition is None else "check"
        raise ValidationFailed(
            "check and transition page a transition's examples together",
            errors=[{"loc": ["query", missing], "msg": "required with the other"}],
        )
    after_example = None if cursor is None else example_after(cursor)
    found = await diffing.computed()
    if check is not None and transition is not None:
        page = found.check(check).page(transition, after_example, limit)
        return Response(orjson.dumps(page), media_type="application/json")
    return Response(orjson.dumps(found.summary()), media_type="application/json")
