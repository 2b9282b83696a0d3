"""Reports: list, get, body bytes, forSubject, verify, evaluator health."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from app.api.access import Admin, ReportReader, ReportReaderOrPeer
from app.api.deps import AppMetrics, PublicURL, Reader, ReportReads, Session, State
from app.api.routers.route import EdgeRoute, body_example
from app.schemas.problems import AUTHENTICATED, BODY, LISTED, problems
from app.schemas.report_queries import ForSubjectQuery, ReportListQuery
from app.schemas.reports import (
    EvaluatorHealth,
    ForSubjectOut,
    ForSubjectVsaOut,
    ReportList,
    ReportOut,
    ReportSummaryList,
    ResolvedOut,
    ResolveIn,
    VerifyIn,
    VerifyOut,
)
from app.services import report_lists, vsa
from app.services import reports as service

PREFIX = "/evaluations/api"
router = APIRouter(prefix=PREFIX, tags=["reports"], route_class=EdgeRoute, responses=AUTHENTICATED)
JSON = "application/json"
# A path convertor, so that /reports/verify, /reports/bundle and the like never read as an id.
REPORT = "/reports/{report_id:uuid}"


def json_response(content: bytes) -> Response:
    """Already-rendered JSON bytes."""
    return Response(content=content, media_type=JSON)


@router.get("/reports", response_model=ReportList | ReportSummaryList, responses=LISTED)
async def list_reports(
    principal: ReportReader,
    reader: ReportReads,
    public_url: PublicURL,
    state: State,
    query: Annotated[ReportListQuery, Query()],
) -> Response:
    """Reports newest first, filtered, with an opaque cursor to the next page."""
    return json_response(
        await report_lists.list_reports(
            reader,
            principal,
            query.filters(),
            public_base_url=public_url,
            limit=query.limit,
            cursor=query.cursor,
            view=query.view,
            cache=state.list_pages,
            items=state.list_items,
        )
    )


@router.get("/reports/forSubject", response_model=ForSubjectOut | ForSubjectVsaOut)
async def for_subject(
    query: Annotated[ForSubjectQuery, Query()],
    principal: ReportReaderOrPeer,
    reader: ReportReads,
    public_url: PublicURL,
    state: State,
) -> Response:
    """The current, unexpired gate reports about one subject; empty means: refuse the gate."""
    if query.format == "vsa":
        return json_response(
            await vsa.for_subject(reader, principal, query, public_url, state.signer)
        )
    return json_response(await service.for_subject(reader, principal, query, public_url))


@router.post(
    "/reports/verify",
    response_model=VerifyOut,
    responses={**problems(404), **BODY},
    openapi_extra=body_example({"report_id": "0b6c1f0e-8a57-4b1e-9f57-1d2c3b4a5e6f"}),
)
async def verify_report(
    body: VerifyIn, principal: ReportReader, session: Session, metrics: AppMetrics
) -> VerifyOut:
    """Re-hash the stored bytes; a mismatch opens an incident."""
    return await service.verify(session, principal, uuid.UUID(body.report_id), metrics)


@router.post(
    "/incidents/{incident_id}/resolve",
    response_model=ResolvedOut,
    responses={**problems(404), **BODY},
    openapi_extra=body_example({"reason": "the object store was restored from backup"}),
)
async def resolve_incident(
    incident_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    body: ResolveIn,
    principal: Admin,
    session: Session,
) -> ResolvedOut:
    """Close an open incident of the project (audited: the token and the reason are kept)."""
    return await service.resolve_incident(session, principal, incident_id, body.reason)


@router.get("/health/evaluator", response_model=EvaluatorHealth)
async def evaluator_health(
    principal: ReportReader, session: Session, metrics: AppMetrics
) -> EvaluatorHealth:
    """Open incidents: reports that no longer verify."""
    return await service.evaluator_health(session, principal, metrics)


@router.get(REPORT, response_model=ReportOut, responses=problems(404))
async def get_report(
    report_id: uuid.UUID, principal: ReportReader, reader: ReportReads, public_url: PublicURL
) -> Response:
    """One report with its envelope."""
    return json_response(await service.served(reader, principal, report_id, public_url))


@router.get(
    REPORT + "/body",
    responses={
        200: {
            "content": {JSON: {"schema": {"type": "object"}}},
            "description": "the stored canonical bytes, with `Repr-Digest`",
            "headers": {"Repr-Digest": {"schema": {"type": "string"}}},
        },
        **problems(404),
    },
)
async def get_report_body(
    report_id: uuid.UUID, principal: ReportReader, reader: Reader
) -> Response:
    """The stored canonical bytes verbatim, with `Repr-Digest`."""
    body, digest_header = await service.body_bytes(reader, principal, report_id)
    return Response(content=body, media_type=JSON, headers={"Repr-Digest": digest_header})
