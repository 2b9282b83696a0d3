"""The asyncpg connection under a SQLAlchemy session, for COPY and bulk reads."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession


async def driver_of(session: AsyncSession) -> Any:
    """The raw driver connection under a session (in the session's transaction)."""
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    return raw.driver_connection
