"""Readiness: the database and the object store answer, within a time budget."""

from __future__ import annotations

import asyncio
import math

from sqlalchemy.ext.asyncio import AsyncEngine

from app.domain.errors import ServiceUnavailable
from app.platform.db import ReadPool, reading
from app.platform.storage import ObjectStore
from app.repositories import health as repo


async def _database_answers(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        await repo.ping(connection)


class LogInconsistent(Exception):
    """The transparency log's stored tree disagreed with itself at the last cut."""


async def _read_pool_answers(pool: ReadPool) -> None:
    async with reading(pool) as connection:
        found = await repo.open_log_incident(connection)
    if found is not None:
        raise LogInconsistent(found)


async def readiness(
    engine: AsyncEngine, read_pool: ReadPool, store: ObjectStore, within: float
) -> dict[str, str]:
    """What /readyz answers; 503 naming each dependency that did not answer within `within`
    seconds (all are asked at once, so a stalled one costs no more than that). Each pool is
    asked for a connection of its own: a pool whose every connection is held (wedged, or
    saturated past `within`) makes the process unready, as it is for the requests it takes."""
    checks = {
        "database": _database_answers(engine),
        "read pool": _read_pool_answers(read_pool),
        "object store": store.ping(),
    }
    outcomes = await asyncio.gather(
        *(asyncio.wait_for(check, within) for check in checks.values()), return_exceptions=True
    )
    failed = [
        f"the transparency log is inconsistent ({outcome}); resolve the incident once mended"
        if isinstance(outcome, LogInconsistent)
        else f"the {name} does not answer"
        + (f" within {within:g} s" if isinstance(outcome, TimeoutError) else "")
        for name, outcome in zip(checks, outcomes, strict=True)
        if isinstance(outcome, BaseException)
    ]
    if failed:
        raise ServiceUnavailable("; ".join(failed), retry_after=max(1, math.ceil(within)))
    return {"status": "ready", "database": "ok", "read_pool": "ok", "object_store": "ok"}
