"""Linking peers, and the report endpoint peers call."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response, status

from app.api.access import Peer, PeerManager
from app.api.deps import Callbacks, PublicURL, Session, State
from app.api.routers.route import EdgeRoute, body_example
from app.schemas.peers import PeerCreated, PeerIn, PeerList, PeerReportIn
from app.schemas.problems import AUTHENTICATED, BODY, problems
from app.schemas.reports import ReportOut
from app.services import peers as service

router = APIRouter(tags=["peers"], route_class=EdgeRoute, responses=AUTHENTICATED)


@router.post(
    "/api/v1/peers",
    status_code=status.HTTP_201_CREATED,
    response_model=PeerCreated,
    responses=BODY,
    openapi_extra=body_example(
        {"name": "codebook", "callback_url": "https://codebook.example/hooks"}
    ),
)
async def link_peer(
    body: PeerIn, principal: PeerManager, session: Session, callbacks: Callbacks
) -> PeerCreated:
    """Link a peer; its token and signing secret are shown once. The callback must be https
    and reach public addresses only (docs/api.md, "Peers")."""
    return await service.link(session, principal, body.name, body.callback_url, callbacks)


@router.get("/api/v1/peers", response_model=PeerList)
async def list_peers(principal: PeerManager, session: Session) -> PeerList:
    """The project's linked peers."""
    return PeerList(peers=await service.list_peers(session, principal))


@router.delete(
    "/api/v1/peers/{peer_id}", status_code=status.HTTP_204_NO_CONTENT, responses=problems(404)
)
async def unlink_peer(
    peer_id: uuid.UUID, principal: PeerManager, session: Session, state: State
) -> Response:
    """Unlink a peer: its token stops working, pending messages to it are dropped."""
    await service.unlink(session, principal, peer_id, state.principals)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/project/api/peer/report",
    response_model=ReportOut,
    responses={**problems(404), **BODY},
    openapi_extra=body_example({"report_id": "0b6c1f0e-8a57-4b1e-9f57-1d2c3b4a5e6f"}),
)
async def peer_report(
    body: PeerReportIn, principal: Peer, session: Session, public_url: PublicURL
) -> Response:
    """A report for a peer, by report id or evaluation id."""
    return Response(
        content=await service.report_for_peer(session, principal, body, public_url),
        media_type="application/json",
    )
