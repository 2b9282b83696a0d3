"""Readiness: the database and the object store answer, within a time budget."""

from __future__ import annotations

import asyncio
import math

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.errors import ServiceUnavailable
from app.storage import ObjectStore


async def _database_answers(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        await connection.execute(text("SELECT 1"))


async def readiness(engine: AsyncEngine, store: ObjectStore, within: float) -> dict[str, str]:
    """What /readyz answers; 503 naming each dependency that did not answer within `within`
    seconds (both are asked at once, so a stalled one costs no more than that)."""
    checks = {"database": _database_answers(engine), "object store": store.ping()}
    outcomes = await asyncio.gather(
        *(asyncio.wait_for(check, within) for check in checks.values()), return_exceptions=True
    )
    failed = [
        f"the {name} does not answer"
        + (f" within {within:g} s" if isinstance(outcome, TimeoutError) else "")
        for name, outcome in zip(checks, outcomes, strict=True)
        if isinstance(outcome, BaseException)
    ]
    if failed:
        raise ServiceUnavailable("; ".join(failed), retry_after=max(1, math.ceil(within)))
    return {"status": "ready", "database": "ok", "object_store": "ok"}
