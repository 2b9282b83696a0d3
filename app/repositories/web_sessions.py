"""Browser sessions: create, resolve to a principal, end."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import WebSession
from app.platform.db import ReadConnection

SESSION_SQL = """
SELECT s.csrf_token, t.id, t.name, t.kind, t.permissions, t.assurance_cap,
       p.id AS project_id, p.slug AS project_slug, o.id AS organization_id,
       o.slug AS organization_slug
FROM web_sessions s
JOIN api_tokens t ON t.id = s.token_id
JOIN projects p ON p.id = t.project_id
JOIN organizations o ON o.id = p.organization_id
WHERE s.secret_hash = $1 AND s.ended_at IS NULL AND s.expires_at > now()
  AND t.revoked_at IS NULL
"""


async def create(
    session: AsyncSession, secret_hash: bytes, token_id: uuid.UUID, csrf: str, expires: datetime
) -> None:
    """Record a signed-in browser."""
    session.add(
        WebSession(secret_hash=secret_hash, token_id=token_id, csrf_token=csrf, expires_at=expires)
    )
    await session.flush()


async def resolve(connection: ReadConnection, secret_hash: bytes) -> Any:
    """The live session with this cookie hash, with its token's principal columns."""
    return await connection.fetchrow(SESSION_SQL, secret_hash)


async def end(session: AsyncSession, secret_hash: bytes, at: datetime) -> None:
    """Sign a browser out."""
    await session.execute(
        update(WebSession)
        .where(WebSession.secret_hash == secret_hash, WebSession.ended_at.is_(None))
        .values(ended_at=at)
    )
