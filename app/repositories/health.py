"""What readiness asks the database: that it answers, and whether the log has an open incident."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.platform.db import ReadConnection


async def ping(connection: AsyncConnection) -> None:
    """One round trip."""
    await connection.execute(text("SELECT 1"))


async def open_log_incident(reader: ReadConnection) -> str | None:
    """The detail of the oldest unresolved incident of the log (one naming no report)."""
    found: str | None = await reader.fetchval(
        "SELECT detail FROM incidents WHERE report_id IS NULL AND resolved_at IS NULL"
        " ORDER BY id LIMIT 1"
    )
    return found
