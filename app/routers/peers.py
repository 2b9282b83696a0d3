"""Linking peers, and the report endpoint peers call."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Depends, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, require, require_peer
from app.db import get_session
from app.routers.body import body_doc, json_body, validate
from app.routers.deps import settings_of
from app.schemas.peers import PeerCreated, PeerIn, PeerList, PeerReportIn
from app.schemas.reports import ReportOut
from app.services import peers as service
from app.services import reports

router = APIRouter(tags=["peers"])
Session = Depends(get_session, scope="function")


@router.post(
    "/api/v1/peers",
    status_code=status.HTTP_201_CREATED,
    response_model=PeerCreated,
    openapi_extra=body_doc(
        PeerIn, example={"name": "codebook", "callback_url": "https://codebook.example/hooks"}
    ),
)
async def link_peer(
    request: Request,
    principal: Principal = Depends(require("peer.manage")),
    session: AsyncSession = Session,
) -> PeerCreated:
    """Link a peer; its token and signing secret are shown once."""
    body = validate(PeerIn, await json_body(request, settings_of(request).max_json_body_bytes))
    return await service.link(session, principal, body.name, body.callback_url)


@router.get("/api/v1/peers", response_model=PeerList)
async def list_peers(
    principal: Principal = Depends(require("peer.manage")),
    session: AsyncSession = Session,
) -> PeerList:
    """The project's linked peers."""
    return PeerList(peers=await service.list_peers(session, principal))


@router.delete("/api/v1/peers/{peer_id}", status_code=status.HTTP_204_NO_CONTENT)
async def unlink_peer(
    request: Request,
    peer_id: uuid.UUID,
    principal: Principal = Depends(require("peer.manage")),
    session: AsyncSession = Session,
) -> Response:
    """Unlink a peer: its token stops working, pending messages to it are dropped."""
    await service.unlink(session, principal, peer_id)
    request.app.state.principals.forget_all()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/project/api/peer/report",
    response_model=ReportOut,
    openapi_extra=body_doc(
        PeerReportIn, example={"report_id": "0b6c1f0e-8a57-4b1e-9f57-1d2c3b4a5e6f"}
    ),
)
async def peer_report(
    request: Request,
    principal: Principal = Depends(require_peer),
    session: AsyncSession = Session,
) -> Response:
    """A report for a peer, by report id or evaluation id."""
    settings = settings_of(request)
    body = validate(PeerReportIn, await json_body(request, settings.max_json_body_bytes))
    report, envelope = await service.report_for_peer(
        session,
        principal,
        None if body.report_id is None else uuid.UUID(body.report_id),
        None if body.evaluation_id is None else uuid.UUID(body.evaluation_id),
    )
    return Response(
        content=reports.representation(report, envelope, settings.public_base_url),
        media_type="application/json",
    )
