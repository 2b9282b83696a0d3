"""Linking peers, and the endpoint peers read reports through."""

from __future__ import annotations

import base64
import secrets
import uuid
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import Forbidden, NotFound, validation_error
from app.identity.auth import Principal, PrincipalCache
from app.models import Peer
from app.platform.outbound import CallbackPolicy, CallbackRefused
from app.repositories import peers as repo
from app.repositories import raw, reads
from app.schemas.peers import PeerCreated, PeerOut, PeerReportIn
from app.services import projects, reports


def peer_out(peer: Peer) -> PeerOut:
    """A peer as listed (never its secrets)."""
    return PeerOut(
        peer_id=str(peer.id),
        name=peer.name,
        callback_url=peer.callback_url,
        status=peer.status,
        status_reason=peer.status_reason,
        created_at=peer.created_at,
    )


async def link(
    session: AsyncSession,
    principal: Principal,
    name: str,
    callback_url: str,
    callbacks: CallbackPolicy,
) -> PeerCreated:
    """Link a peer: a peer token and a signing secret, both shown once. The callback must be
    one the policy lets the service call (422 naming the rule it breaks). The peer's token
    reads the project's reports, so linking needs `report.read` beside `peer.manage`: a
    token never hands on more than it holds (decision 0019)."""
    if not principal.has("report.read"):
        raise Forbidden(
            "linking a peer gives it a token that reads this project's reports: the token "
            "needs the permission 'report.read' as well as 'peer.manage'"
        )
    try:
        await callbacks.check(callback_url)
    except CallbackRefused as exc:
        raise validation_error(("body", "callback_url"), str(exc)) from None
    token, secret = await projects.create_token(
        session, principal.project_id, f"peer:{name}", [], "peer"
    )
    signing_secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    peer = await repo.add_peer(
        session,
        Peer(
            id=uuid.uuid4(),
            project_id=principal.project_id,
            name=name,
            callback_url=callback_url,
            token_id=token.id,
            signing_secret=signing_secret,
            status="active",
        ),
    )
    return PeerCreated(peer_id=str(peer.id), token=secret, signing_secret=signing_secret)


async def list_peers(session: AsyncSession, principal: Principal) -> list[PeerOut]:
    """The project's linked peers."""
    return [peer_out(p) for p in await repo.list_peers(session, principal.project_id)]


async def unlink(
    session: AsyncSession, principal: Principal, peer_id: uuid.UUID, principals: PrincipalCache
) -> None:
    """Unlink a peer: its token is revoked and nothing more is sent to it."""
    peer = await repo.get_peer(session, principal.project_id, peer_id)
    if peer is None:
        raise NotFound("no such peer")
    await repo.set_status(
        session, peer.id, "unlinked", "unlinked by the project", datetime.now(UTC)
    )
    principals.forget_all()


async def report_for_peer(
    session: AsyncSession, principal: Principal, body: PeerReportIn, public_base_url: str
) -> bytes:
    """The report a peer asks for, by report or evaluation id, in the peer's project."""
    connection = await raw.read_connection(session)
    if body.report_id is not None:
        found = await reads.stored(connection, principal.project_id, uuid.UUID(body.report_id))
    else:
        assert body.evaluation_id is not None
        found = await reads.stored_for_evaluation(
            connection, principal.project_id, uuid.UUID(body.evaluation_id)
        )
    if found is None:
        raise NotFound("no such report")
    return reports.representation(found, public_base_url)
