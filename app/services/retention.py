"""`evalbook retention apply`: remove example bodies and case outputs, keep their digests."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.repositories import retention as repo
from app.storage import ObjectStore

logger = logging.getLogger(__name__)


@dataclass
class RetentionResult:
    """What one run removed."""

    bodies: int = 0
    outputs: int = 0
    objects: int = 0


async def _in_batches(
    sessionmaker: async_sessionmaker[AsyncSession],
    remove: Callable[[AsyncSession, datetime], Awaitable[int]],
    cutoff: datetime,
) -> int:
    """Run `remove` in committed transactions until a batch comes back short; the total."""
    total = 0
    while True:
        async with sessionmaker() as session, session.begin():
            removed = await remove(session, cutoff)
        total += removed
        if removed < repo.BATCH_ROWS:
            return total


async def apply(
    sessionmaker: async_sessionmaker[AsyncSession], store: ObjectStore, older_than: timedelta
) -> RetentionResult:
    """Remove bodies and outputs created before now - `older_than`, in batches of committed
    transactions; then delete the objects no kept output names. Reports are untouched."""
    cutoff = datetime.now(UTC) - older_than
    result = RetentionResult(
        bodies=await _in_batches(sessionmaker, repo.remove_bodies, cutoff),
        outputs=await _in_batches(sessionmaker, repo.remove_outputs, cutoff),
    )
    async with sessionmaker() as session, session.begin():
        await repo.lock_output_objects(session, shared=False)
        keys = await repo.unreferenced_keys(session)
        for key in keys:
            await store.delete(key)
        if keys:
            await repo.forget_keys(session, keys)
        result.objects = len(keys)
    logger.info(
        "retention before %s: %d bodies, %d outputs, %d objects removed",
        cutoff.isoformat(),
        result.bodies,
        result.outputs,
        result.objects,
    )
    return result
