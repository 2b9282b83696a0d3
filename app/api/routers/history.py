"""A suite's history of gate reports (the trend behind its page)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from app.api.access import ReportReader
from app.api.deps import ReportReads
from app.api.routers.route import EdgeRoute
from app.domain.identifiers import IDENTIFIER_PATTERN
from app.schemas.diffs import SuiteHistory
from app.schemas.problems import AUTHENTICATED, problems
from app.services import history as service

router = APIRouter(
    prefix="/evaluations/api", tags=["reports"], route_class=EdgeRoute, responses=AUTHENTICATED
)


@router.get("/suites/{name}/history", response_model=SuiteHistory, responses=problems(404, 422))
async def suite_history(
    name: Annotated[str, Path(pattern=IDENTIFIER_PATTERN, max_length=200)],
    principal: ReportReader,
    reader: ReportReads,
    check: Annotated[str | None, Query(pattern=IDENTIFIER_PATTERN, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_HISTORY)] = 100,
) -> Response:
    """The suite's latest gate reports in issue order, each check's score and interval."""
    points = await service.suite_history(reader, principal, name, check, limit)
    return Response(service.history_json(name, points), media_type="application/json")
