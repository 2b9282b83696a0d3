"""Evaluations and case ingestion."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Annotated, Protocol

from fastapi import APIRouter, Depends, Header, Request, Response, status

from app.api.access import EvaluationWriter, ReportReader
from app.api.deps import (
    AppSettings,
    FinishNeeds,
    IngestNeeds,
    IngestTurn,
    PublicURL,
    Session,
    Suites,
)
from app.api.routers.body import Numbered, StreamPace, ndjson_line_chunks
from app.api.routers.route import EdgeRoute, NDJSONRoute, body_example
from app.domain.errors import ServiceUnavailable
from app.schemas.evaluations import (
    CaseBatchIn,
    CaseBatchOut,
    EvaluationOut,
    EvaluationStartIn,
    EvaluationStartOut,
)
from app.schemas.problems import AUTHENTICATED, BODY, problems
from app.schemas.reports import ReportOut
from app.services import evaluations as service

PREFIX = "/api/v1/evaluations"
router = APIRouter(
    prefix=PREFIX, tags=["evaluations"], route_class=EdgeRoute, responses=AUTHENTICATED
)
# Registered before `router`: the NDJSON form of a case batch, matched on its media type.
ndjson_router = APIRouter(prefix=PREFIX, route_class=NDJSONRoute, include_in_schema=False)
JSON = "application/json"
ISSUED = {
    **problems(404, 409),
    201: {"model": ReportOut, "description": "the report, issued now"},
}
START_EXAMPLE = {
    "subject": {"digest": "sha1:4f1c0a7e9b2d3c5e6f708192a3b4c5d6e7f80912", "repo": "acme/web"},
    "suite": {"name": "rag-quality"},
    "mode": "gate",
    "execution_mode": "external",
}
CASES_EXAMPLE = {
    "cases": [
        {
            "check_id": "accuracy",
            "example_id": "e00",
            "repeat": 0,
            "status": "pass",
            "output": {"answer": "4"},
        }
    ]
}
IdempotencyKey = Annotated[
    str | None,
    Header(max_length=200, description="makes a retried start return the first evaluation"),
]


def json_response(content: bytes, created: bool = False) -> Response:
    """Already-rendered JSON bytes."""
    code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return Response(content=content, media_type=JSON, status_code=code)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=EvaluationStartOut,
    responses={**problems(404), **BODY},
    openapi_extra=body_example(START_EXAMPLE),
)
async def start_evaluation(
    body: EvaluationStartIn,
    principal: EvaluationWriter,
    session: Session,
    suites: Suites,
    idempotency_key: IdempotencyKey = None,
) -> EvaluationStartOut:
    """Start an evaluation; `Idempotency-Key` makes a retried start return the first one."""
    return await service.start(session, principal, body, idempotency_key, suites)


@router.get("/{evaluation_id}", response_model=EvaluationOut, responses=problems(404))
async def get_evaluation(
    evaluation_id: uuid.UUID, principal: ReportReader, session: Session, suites: Suites
) -> EvaluationOut:
    """Status and case counts per check."""
    return await service.get(session, principal, evaluation_id, suites)


@router.post(
    "/{evaluation_id}/cases",
    response_model=CaseBatchOut,
    responses={**problems(404, 409), **BODY},
    openapi_extra=body_example(CASES_EXAMPLE, ndjson_item="CaseIn"),
)
async def add_cases(
    evaluation_id: uuid.UUID,
    body: CaseBatchIn,
    principal: EvaluationWriter,
    session: Session,
    needs: IngestNeeds,
) -> CaseBatchOut:
    """Add cases as JSON or NDJSON: all or nothing; identical re-sends are accepted."""
    batches = service.json_case_batches(body.cases)
    return await service.ingest(
        session, principal, evaluation_id, batches, ndjson=False, needs=needs
    )


@dataclass(frozen=True, slots=True)
class CaseStream:
    """An NDJSON body's case lines, numbered, in batches, read as a stream at its pace."""

    lines: AsyncIterator[Numbered]
    pace: StreamPace

    def database_ended(self) -> None:
        """The database ended the session the lines are written on: stop reading now."""
        self.pace.interrupt(
            ServiceUnavailable(
                "the database ended this request's session; nothing of it was kept: send "
                "the same lines again"
            )
        )


async def case_lines(request: Request, settings: AppSettings) -> CaseStream:
    """The NDJSON body's case lines (the service parses them), kept to the stream's pace."""
    pace = StreamPace(settings.ingest_line_seconds, settings.ingest_stream_seconds)
    return CaseStream(ndjson_line_chunks(request, settings.max_ndjson_line_bytes, pace), pace)


@ndjson_router.post("/{evaluation_id}/cases", response_model=CaseBatchOut)
async def add_case_lines(
    evaluation_id: uuid.UUID,
    stream: Annotated[CaseStream, Depends(case_lines)],
    principal: EvaluationWriter,
    turn: IngestTurn,
    session: Session,
    needs: IngestNeeds,
) -> CaseBatchOut:
    """The NDJSON form of `add_cases`."""
    return await service.ingest(
        session,
        principal,
        evaluation_id,
        stream.lines,
        ndjson=True,
        needs=needs,
        interrupt=stream.database_ended,
    )


def _issuer(
    evaluation_id: uuid.UUID,
    principal: EvaluationWriter,
    session: Session,
    needs: FinishNeeds,
    public_url: PublicURL,
) -> IssueCall:
    """What finish and cancel both declare (the evaluation, its writer, the session, what
    issuing needs, the public URL), bound to the one service call they make."""
    return functools.partial(
        service.finish, session, principal, evaluation_id, needs=needs, public_url=public_url
    )


class IssueCall(Protocol):
    """`service.finish` with all but `cancel` given: (representation, created now)."""

    def __call__(self, *, cancel: bool) -> Awaitable[tuple[bytes, bool]]: ...


Issuer = Annotated[IssueCall, Depends(_issuer)]


@router.post("/{evaluation_id}/finish", response_model=ReportOut, responses=ISSUED)
async def finish_evaluation(issue: Issuer) -> Response:
    """Aggregate and issue the report: 201 the first time, 200 with the same report after."""
    return json_response(*await issue(cancel=False))


@router.post("/{evaluation_id}/cancel", response_model=ReportOut, responses=ISSUED)
async def cancel_evaluation(issue: Issuer) -> Response:
    """Record `cancelled` for every pending case, then issue the report as finish does."""
    return json_response(*await issue(cancel=True))


@router.get("/{evaluation_id}/report", response_model=ReportOut, responses=problems(404))
async def evaluation_report(
    evaluation_id: uuid.UUID, principal: ReportReader, session: Session, public_url: PublicURL
) -> Response:
    """The evaluation's report; 404 until it is issued."""
    return json_response(await service.report_of(session, principal, evaluation_id, public_url))
