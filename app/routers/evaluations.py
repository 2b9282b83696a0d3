"""Evaluations and case ingestion."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Header, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, require
from app.db import get_session
from app.errors import validation_error
from app.routers.body import body_doc, is_ndjson, json_body, ndjson_value_batches, validate
from app.routers.deps import object_store, settings_of, suite_cache
from app.schemas.evaluations import (
    CaseBatchIn,
    CaseBatchOut,
    CaseIn,
    EvaluationOut,
    EvaluationStartIn,
    EvaluationStartOut,
)
from app.schemas.reports import ReportOut
from app.services import evaluations as service
from app.services import issuance, reports

router = APIRouter(prefix="/api/v1/evaluations", tags=["evaluations"])
Session = Depends(get_session, scope="function")
JSON_BATCH = 1000

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


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=EvaluationStartOut,
    openapi_extra=body_doc(EvaluationStartIn, example=START_EXAMPLE),
)
async def start_evaluation(
    request: Request,
    idempotency_key: str | None = Header(default=None, max_length=200),
    principal: Principal = Depends(require("evaluation.write")),
    session: AsyncSession = Session,
) -> EvaluationStartOut:
    """Start an evaluation; `Idempotency-Key` makes a retried start return the first one."""
    raw = await json_body(request, settings_of(request).max_json_body_bytes)
    body = validate(EvaluationStartIn, raw)
    return await service.start(session, principal, body, raw, idempotency_key, suite_cache(request))


@router.get("/{evaluation_id}", response_model=EvaluationOut)
async def get_evaluation(
    request: Request,
    evaluation_id: uuid.UUID,
    principal: Principal = Depends(require("report.read")),
    session: AsyncSession = Session,
) -> EvaluationOut:
    """Status and case counts per check."""
    return await service.get(session, principal, evaluation_id, suite_cache(request))


async def _json_cases(request: Request, limit: int) -> AsyncIterator[list[tuple[int, Any]]]:
    raw = await json_body(request, limit)
    if type(raw) is not dict or set(raw) != {"cases"}:
        raise validation_error(("body",), 'the body is {"cases": [...]}')
    if type(raw["cases"]) is not list:
        raise validation_error(("body", "cases"), "a list of cases")
    cases = list(enumerate(raw["cases"]))
    for start in range(0, len(cases), JSON_BATCH):
        yield cases[start : start + JSON_BATCH]


@router.post(
    "/{evaluation_id}/cases",
    response_model=CaseBatchOut,
    openapi_extra=body_doc(CaseBatchIn, ndjson_item=CaseIn, example=CASES_EXAMPLE),
)
async def add_cases(
    request: Request,
    response: Response,
    evaluation_id: uuid.UUID,
    principal: Principal = Depends(require("evaluation.write")),
    session: AsyncSession = Session,
) -> CaseBatchOut:
    """Add cases as JSON or NDJSON: all or nothing; identical re-sends are accepted."""
    settings = settings_of(request)
    ndjson = is_ndjson(request)
    cases = (
        ndjson_value_batches(request, settings.max_ndjson_line_bytes)
        if ndjson
        else _json_cases(request, settings.max_json_body_bytes)
    )
    answer = await service.ingest(
        session,
        principal,
        evaluation_id,
        cases,
        ndjson=ndjson,
        cache=suite_cache(request),
        store=object_store(request),
        inline_limit=settings.inline_output_limit_bytes,
        chunk_rows=settings.ingest_chunk_rows,
    )
    request.app.state.metrics.cases_accepted.inc(answer.accepted)
    response.status_code = status.HTTP_200_OK
    return answer


async def _issue(
    request: Request,
    evaluation_id: uuid.UUID,
    principal: Principal,
    session: AsyncSession,
    cancel: bool,
) -> Response:
    settings = settings_of(request)
    report_id, created = await issuance.issue(
        session,
        principal,
        evaluation_id,
        cancel=cancel,
        cache=suite_cache(request),
        reader_pool=request.app.state.reader_pool,
    )
    report, envelope = await reports.get(session, principal, report_id)
    if created:
        request.app.state.metrics.reports_issued.inc()
    return Response(
        content=reports.representation(report, envelope, settings.public_base_url),
        media_type="application/json",
        status_code=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
    )


@router.post(
    "/{evaluation_id}/finish",
    response_model=ReportOut,
    responses={201: {"model": ReportOut, "description": "the report, issued now"}},
)
async def finish_evaluation(
    request: Request,
    evaluation_id: uuid.UUID,
    principal: Principal = Depends(require("evaluation.write")),
    session: AsyncSession = Session,
) -> Response:
    """Aggregate and issue the report: 201 the first time, 200 with the same report after."""
    return await _issue(request, evaluation_id, principal, session, cancel=False)


@router.post(
    "/{evaluation_id}/cancel",
    response_model=ReportOut,
    responses={201: {"model": ReportOut, "description": "the report, issued now"}},
)
async def cancel_evaluation(
    request: Request,
    evaluation_id: uuid.UUID,
    principal: Principal = Depends(require("evaluation.write")),
    session: AsyncSession = Session,
) -> Response:
    """Record `cancelled` for every pending case, then issue the report as finish does."""
    return await _issue(request, evaluation_id, principal, session, cancel=True)


@router.get("/{evaluation_id}/report", response_model=ReportOut)
async def evaluation_report(
    request: Request,
    evaluation_id: uuid.UUID,
    principal: Principal = Depends(require("report.read")),
    session: AsyncSession = Session,
) -> Response:
    """The evaluation's report; 404 until it is issued."""
    report, envelope = await reports.for_evaluation(session, principal, evaluation_id)
    return Response(
        content=reports.representation(report, envelope, settings_of(request).public_base_url),
        media_type="application/json",
    )
