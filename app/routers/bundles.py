"""Reproducibility bundles: export, list, read, download."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, require
from app.bundles.format import MEDIA_TYPE
from app.db import get_session
from app.errors import NotFound
from app.models import Bundle
from app.routers.body import body_doc, body_uuid, json_body, validate
from app.routers.deps import object_store, settings_of
from app.schemas.bundles import BundleIn, BundleList, BundleOut
from app.services import bundles as service
from app.storage import ObjectNotFound

router = APIRouter(tags=["bundles"])
Session = Depends(get_session, scope="function")


@router.post(
    "/evaluations/api/reports/bundle",
    status_code=201,
    response_model=BundleOut,
    openapi_extra=body_doc(BundleIn, example={"report_id": "0b6c1f0e-8a57-4b1e-9f57-1d2c3b4a5e6f"}),
)
async def export_bundle(
    request: Request,
    principal: Principal = Depends(require("report.export")),
    session: AsyncSession = Session,
) -> BundleOut:
    """Build a report's bundle in object storage; 201 with its record."""
    body = validate(BundleIn, await json_body(request, settings_of(request).max_json_body_bytes))
    report_id = body_uuid(body.report_id, "report_id")
    return await service.export(
        session,
        principal,
        report_id,
        store=object_store(request),
        janitor=request.app.state.upload_janitor,
        settings=settings_of(request),
    )


@router.get("/evaluations/api/reports/bundles", response_model=BundleList)
async def list_bundles(
    report_id: uuid.UUID | None = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_PAGE)] = 50,
    cursor: str | None = None,
    principal: Principal = Depends(require("report.export")),
    session: AsyncSession = Session,
) -> BundleList:
    """Bundle records newest first, optionally of one report."""
    return await service.list_bundles(
        session, principal, report_id=report_id, limit=limit, cursor=cursor
    )


@router.get("/evaluations/api/reports/bundles/{bundle_id}", response_model=BundleOut)
async def get_bundle(
    bundle_id: uuid.UUID,
    principal: Principal = Depends(require("report.export")),
    session: AsyncSession = Session,
) -> BundleOut:
    """One bundle record."""
    return service.bundle_out(await service.get(session, principal, bundle_id))


@router.get(
    "/evaluations/api/reports/bundles/{bundle_id}/content",
    response_class=StreamingResponse,
    responses={200: {"content": {MEDIA_TYPE: {}}, "description": "the bundle's stored bytes"}},
)
async def bundle_content(
    request: Request,
    bundle_id: uuid.UUID,
    principal: Principal = Depends(require("report.export")),
    session: AsyncSession = Session,
) -> StreamingResponse:
    """The bundle's bytes, streamed (bodies inside need dataset.read_body)."""
    bundle, chunks = await service.content(session, principal, bundle_id, object_store(request))
    return await stream_bundle(bundle, chunks)


async def stream_bundle(bundle: Bundle, chunks: AsyncIterator[bytes]) -> StreamingResponse:
    """A bundle's bytes as a download. The first chunk is read before answering, so a missing
    object or a store outage is still an error response, not a cut stream."""
    try:
        first = await anext(chunks, b"")
    except ObjectNotFound:
        raise NotFound("the bundle's object is missing from the store") from None

    async def stream() -> AsyncIterator[bytes]:
        yield first
        async for chunk in chunks:
            yield chunk

    digest = base64.b64encode(bytes.fromhex(bundle.digest.removeprefix("sha256:"))).decode()
    return StreamingResponse(
        stream(),
        media_type=bundle.media_type,
        headers={
            "Content-Length": str(bundle.size_bytes),
            "Content-Disposition": f'attachment; filename="{bundle.id}.jsonl.gz"',
            "Repr-Digest": f"sha-256=:{digest}:",
        },
    )
