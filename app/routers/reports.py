"""Reports: list, get, body bytes, forSubject, verify, evaluator health."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, require
from app.db import get_reader, get_session
from app.repositories import reports as report_repo
from app.routers.body import body_doc, body_uuid, json_body, validate
from app.routers.deps import settings_of
from app.schemas.reports import (
    EvaluatorHealth,
    ForSubjectOut,
    ReportList,
    ReportOut,
    VerifyIn,
    VerifyOut,
)
from app.services import reports as service

router = APIRouter(tags=["reports"])
Session = Depends(get_session, scope="function")
Reader = Depends(get_reader, scope="function")
JSON = "application/json"


def json_response(content: bytes) -> Response:
    """Already-rendered JSON bytes."""
    return Response(content=content, media_type=JSON)


@router.get("/evaluations/api/reports", response_model=ReportList)
async def list_reports(
    request: Request,
    subject_digest: str | None = None,
    suite: str | None = None,
    result: Literal["pass", "fail", "error", "inconclusive"] | None = None,
    status: Literal["current", "superseded"] | None = None,
    mode: Literal["gate", "experiment", "exploratory"] | None = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_PAGE)] = 50,
    cursor: str | None = None,
    principal: Principal = Depends(require("report.read")),
    session: AsyncSession = Session,
) -> Response:
    """Reports newest first, filtered, with an opaque cursor to the next page."""
    return json_response(
        await service.list_reports(
            session,
            principal,
            public_base_url=settings_of(request).public_base_url,
            subject_digest=subject_digest,
            suite=suite,
            result=result,
            status=status,
            mode=mode,
            limit=limit,
            cursor=cursor,
        )
    )


@router.get("/evaluations/api/reports/forSubject", response_model=ForSubjectOut)
async def for_subject(
    request: Request,
    digest: Annotated[str, Query(min_length=1, max_length=300)],
    include_expired: bool = False,
    principal: Principal = Depends(require("report.read", allow_peer=True)),
    reader: Any = Reader,
) -> Response:
    """The current, unexpired gate reports about one subject; empty means: refuse the gate."""
    return json_response(
        await service.for_subject(
            reader, principal, digest, include_expired, settings_of(request).public_base_url
        )
    )


@router.post(
    "/evaluations/api/reports/verify",
    response_model=VerifyOut,
    openapi_extra=body_doc(VerifyIn, example={"report_id": "0b6c1f0e-8a57-4b1e-9f57-1d2c3b4a5e6f"}),
)
async def verify_report(
    request: Request,
    principal: Principal = Depends(require("report.read")),
    session: AsyncSession = Session,
) -> VerifyOut:
    """Re-hash the stored bytes; a mismatch opens an incident."""
    body = validate(VerifyIn, await json_body(request, settings_of(request).max_json_body_bytes))
    report_id = body_uuid(body.report_id, "report_id")
    answer = await service.verify(session, principal, report_id)
    request.app.state.metrics.open_incidents.set(await report_repo.count_open_incidents(session))
    return answer


@router.get("/evaluations/api/health/evaluator", response_model=EvaluatorHealth)
async def evaluator_health(
    request: Request,
    principal: Principal = Depends(require("report.read")),
    session: AsyncSession = Session,
) -> EvaluatorHealth:
    """Open incidents: reports that no longer verify."""
    request.app.state.metrics.open_incidents.set(await report_repo.count_open_incidents(session))
    return await service.evaluator_health(session, principal)


@router.get("/evaluations/api/reports/{report_id}", response_model=ReportOut)
async def get_report(
    request: Request,
    report_id: uuid.UUID,
    principal: Principal = Depends(require("report.read")),
    reader: Any = Reader,
) -> Response:
    """One report with its envelope."""
    view = await service.read(reader, principal, report_id)
    return json_response(service.representation(view, view, settings_of(request).public_base_url))


@router.get(
    "/evaluations/api/reports/{report_id}/body",
    responses={200: {"content": {JSON: {}}, "description": "the stored canonical bytes"}},
)
async def get_report_body(
    report_id: uuid.UUID,
    principal: Principal = Depends(require("report.read")),
    reader: Any = Reader,
) -> Response:
    """The stored canonical bytes verbatim, with `Repr-Digest`."""
    report = await service.read(reader, principal, report_id)
    return Response(
        content=report.body,
        media_type=JSON,
        headers={"Repr-Digest": service.repr_digest(report.body)},
    )
