"""Browser sessions: signing in with a token once, resolving the cookie, signing out."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.identity.auth import Principal, hash_secret
from app.platform.db import ReadConnection
from app.repositories import reads
from app.repositories import web_sessions as repo

SESSION_HOURS = 12


def new_secret() -> str:
    """A fresh random cookie or CSRF value."""
    return secrets.token_urlsafe(32)


async def sign_in(session: AsyncSession, reader: ReadConnection, token: str) -> str | None:
    """Open a session for a valid token; its cookie secret, or None for an unknown token."""
    row = await reads.principal_row(reader, hash_secret(token.strip()))
    if row is None:
        return None
    secret = new_secret()
    expires = datetime.now(UTC) + timedelta(hours=SESSION_HOURS)
    await repo.create(session, hash_secret(secret), row["id"], new_secret(), expires)
    return secret


async def resolve(reader: ReadConnection, secret: str) -> tuple[Principal, str] | None:
    """The principal of a live session cookie and the CSRF token its forms carry, or None."""
    row = await repo.resolve(reader, hash_secret(secret))
    return None if row is None else (Principal.from_row(row), row["csrf_token"])


async def sign_out(session: AsyncSession, secret: str) -> None:
    """End the session of this cookie."""
    await repo.end(session, hash_secret(secret), datetime.now(UTC))
