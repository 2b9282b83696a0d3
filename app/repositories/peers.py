"""Peers and the notification outbox."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import ApiToken, Notification, Peer


async def add_peer(session: AsyncSession, peer: Peer) -> Peer:
    """Store a new peer."""
    session.add(peer)
    await session.flush()
    return peer


async def list_peers(session: AsyncSession, project_id: uuid.UUID) -> list[Peer]:
    """The project's peers that are not unlinked, oldest first."""
    result = await session.execute(
        select(Peer)
        .where(Peer.project_id == project_id, Peer.status != "unlinked")
        .order_by(Peer.created_at, Peer.id)
    )
    return list(result.scalars())


async def get_peer(session: AsyncSession, project_id: uuid.UUID, peer_id: uuid.UUID) -> Peer | None:
    """A linked (or disabled) peer of the project."""
    result = await session.execute(
        select(Peer).where(
            Peer.id == peer_id, Peer.project_id == project_id, Peer.status != "unlinked"
        )
    )
    return result.scalar_one_or_none()


async def set_status(
    session: AsyncSession, peer_id: uuid.UUID, status: str, reason: str, at: datetime
) -> None:
    """Disable or unlink a peer; its token stops working and its pending messages fail."""
    peer = await session.get(Peer, peer_id)
    assert peer is not None
    peer.status, peer.status_reason, peer.changed_at = status, reason, at
    await session.execute(
        update(ApiToken).where(ApiToken.id == peer.token_id).values(revoked_at=at)
    )
    await session.execute(
        update(Notification)
        .where(Notification.peer_id == peer_id, Notification.status == "pending")
        .values(status="failed", last_error=f"peer {status}: {reason}", finished_at=at)
    )
    await session.flush()


async def active_peer_ids(session: AsyncSession, project_id: uuid.UUID) -> list[uuid.UUID]:
    """Peers that receive notifications."""
    result = await session.execute(
        select(Peer.id).where(Peer.project_id == project_id, Peer.status == "active")
    )
    return list(result.scalars())


async def enqueue(session: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Write outbox rows in the caller's transaction."""
    if rows:
        await session.execute(insert(Notification), rows)


# Due messages, oldest first, at most :per_peer of one peer and none of the :busy peers (a
# peer at its limit of deliveries in flight here), locked with SKIP LOCKED (several service
# processes claim side by side). The ranking reads without locks; the lock re-checks the row.
CLAIM = text(
    """
    WITH ranked AS (
        SELECT id, next_attempt_at,
               row_number() OVER (PARTITION BY peer_id ORDER BY next_attempt_at, id) AS rank
        FROM notifications
        WHERE status = 'pending' AND next_attempt_at <= now()
          AND (claimed_until IS NULL OR claimed_until < now())
          AND NOT (peer_id = ANY(CAST(:busy AS uuid[])))
    ), chosen AS (
        SELECT id FROM notifications
        WHERE id IN (
            SELECT id FROM ranked WHERE rank <= :per_peer
            ORDER BY next_attempt_at, id LIMIT :limit
        )
          AND status = 'pending' AND (claimed_until IS NULL OR claimed_until < now())
        FOR UPDATE SKIP LOCKED
    )
    UPDATE notifications n
    SET claimed_until = now() + make_interval(secs => :lease), attempts = n.attempts + 1
    FROM peers p
    WHERE n.id IN (SELECT id FROM chosen) AND p.id = n.peer_id
    RETURNING n.id, n.message_id, n.peer_id, n.payload, n.attempts, n.created_at,
              p.callback_url, p.signing_secret
    """
)


async def claim_due(
    session: AsyncSession,
    limit: int,
    lease_seconds: float,
    *,
    per_peer: int = 1_000_000,
    busy_peers: Sequence[uuid.UUID] = (),
) -> list[Any]:
    """Claim due messages for a lease, at most `per_peer` of one peer, none of `busy_peers`."""
    result = await session.execute(
        CLAIM,
        {
            "limit": limit,
            "lease": lease_seconds,
            "per_peer": per_peer,
            "busy": list(busy_peers),
        },
    )
    return list(result.all())


async def mark_delivered(session: AsyncSession, notification_id: int, at: datetime) -> None:
    """A 2xx answer: done."""
    await session.execute(
        update(Notification)
        .where(Notification.id == notification_id)
        .values(status="delivered", finished_at=at, claimed_until=None, last_error=None)
    )


async def reschedule(
    session: AsyncSession, notification_id: int, error: str, retry_at: datetime | None, at: datetime
) -> None:
    """A failed attempt: try again at `retry_at`, or give up when it is None."""
    values: dict[str, Any] = {"last_error": error[:1000], "claimed_until": None}
    if retry_at is None:
        values.update(status="failed", finished_at=at)
    else:
        values["next_attempt_at"] = retry_at
    await session.execute(
        update(Notification)
        .where(Notification.id == notification_id, Notification.status == "pending")
        .values(**values)
    )


async def notifications_for(session: AsyncSession, project_id: uuid.UUID) -> list[Notification]:
    """A project's notifications, oldest first (for tests and operators)."""
    result = await session.execute(
        select(Notification).where(Notification.project_id == project_id).order_by(Notification.id)
    )
    return list(result.scalars())
