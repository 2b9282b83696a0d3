"""Reproducibility bundles: export, list, read, download."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from app.api.access import ReportExporter
from app.api.deps import (
    AppSettings,
    CaseTrees,
    Incidents,
    Janitor,
    PublicURL,
    Session,
    State,
    Store,
)
from app.api.routers.params import PageLimit
from app.api.routers.route import EdgeRoute, body_example
from app.bundles.format import MEDIA_TYPE
from app.schemas.bundles import BundleIn, BundleList, BundleOut
from app.schemas.common import Cursor
from app.schemas.problems import AUTHENTICATED, BODY, LISTED, problems
from app.services import bundles as service
from app.services.bundles import Download

PREFIX = "/evaluations/api/reports"
router = APIRouter(prefix=PREFIX, tags=["bundles"], route_class=EdgeRoute, responses=AUTHENTICATED)


def download_response(download: Download) -> StreamingResponse:
    """A bundle's bytes, streamed as an attachment."""
    return StreamingResponse(
        download.chunks, media_type=download.media_type, headers=download.headers
    )


@router.post(
    "/bundle",
    status_code=201,
    response_model=BundleOut,
    responses={**problems(404, 409), **BODY},
    openapi_extra=body_example({"report_id": "0b6c1f0e-8a57-4b1e-9f57-1d2c3b4a5e6f"}),
)
async def export_bundle(
    body: BundleIn,
    principal: ReportExporter,
    session: Session,
    store: Store,
    janitor: Janitor,
    settings: AppSettings,
    public_url: PublicURL,
    trees: CaseTrees,
    incidents: Incidents,
    state: State,
) -> BundleOut:
    """Build a report's bundle in object storage; 201 with its record (409 when the report
    no longer verifies: its incident is opened and nothing is exported)."""
    return await service.export(
        session,
        principal,
        uuid.UUID(body.report_id),
        store=store,
        janitor=janitor,
        settings=settings,
        public_url=public_url,
        trees=trees,
        incidents=incidents,
        log=state.transparency,
        signer=state.signer,
    )


@router.get("/bundles", response_model=BundleList, responses=LISTED)
async def list_bundles(
    principal: ReportExporter,
    session: Session,
    report_id: uuid.UUID | None = None,
    limit: PageLimit = 50,
    cursor: Cursor | None = None,
) -> BundleList:
    """Bundle records newest first, optionally of one report."""
    return await service.list_bundles(
        session, principal, report_id=report_id, limit=limit, cursor=cursor
    )


@router.get("/bundles/{bundle_id}", response_model=BundleOut, responses=problems(404))
async def get_bundle(
    bundle_id: uuid.UUID, principal: ReportExporter, session: Session
) -> BundleOut:
    """One bundle record."""
    return await service.read(session, principal, bundle_id)


@router.get(
    "/bundles/{bundle_id}/content",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
            "description": "the bundle's stored bytes",
        },
        **problems(404),
    },
)
async def bundle_content(
    bundle_id: uuid.UUID, principal: ReportExporter, session: Session, store: Store
) -> StreamingResponse:
    """The bundle's bytes, streamed (bodies inside need dataset.read_body)."""
    return download_response(await service.download(session, principal, bundle_id, store))
