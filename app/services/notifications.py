"""Writing peer notifications: outbox rows in the transaction of the change they announce
(delivered by app/workers/notifications.py). Payloads carry ids only, never a result or a body."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.repositories import peers as repo

SUPERSEDED = "report.superseded"


async def announce_superseded(
    session: AsyncSession,
    project_id: uuid.UUID,
    superseded: list[uuid.UUID],
    successor: uuid.UUID | None,
) -> None:
    """Outbox rows for every active peer and superseded report, in the caller's transaction."""
    if not superseded:
        return
    peers = await repo.active_peer_ids(session, project_id)
    rows: list[dict[str, Any]] = []
    for report_id in superseded:
        payload = orjson.dumps(
            {
                "type": SUPERSEDED,
                "data": {
                    "report_id": str(report_id),
                    "superseded_by": None if successor is None else str(successor),
                },
            }
        ).decode()
        rows.extend(
            {
                "message_id": "msg_" + secrets.token_hex(16),
                "project_id": project_id,
                "peer_id": peer_id,
                "event_type": SUPERSEDED,
                "payload": payload,
            }
            for peer_id in peers
        )
    await repo.enqueue(session, rows)
