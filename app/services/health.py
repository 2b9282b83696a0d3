"""Readiness: the database and the object store answer."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.errors import ServiceUnavailable
from app.storage import ObjectStore, ObjectStoreUnavailable


async def readiness(engine: AsyncEngine, store: ObjectStore) -> dict[str, str]:
    """What /readyz answers; 503 naming the dependency that does not answer."""
    try:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except Exception as exc:
        raise ServiceUnavailable(f"the database does not answer: {type(exc).__name__}") from exc
    try:
        await store.ping()
    except ObjectStoreUnavailable as exc:
        raise ServiceUnavailable("the object store does not answer") from exc
    return {"status": "ready", "database": "ok", "object_store": "ok"}
