"""`evalbook retention apply`: remove example bodies and case outputs, keep their digests."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.platform.storage import ObjectStore
from app.repositories import retention as repo

logger = logging.getLogger(__name__)


@dataclass
class RetentionResult:
    """What one run removed."""

    bodies: int = 0
    outputs: int = 0
    objects: int = 0


@dataclass
class RetentionPreview:
    """What a run would remove (nothing is removed to find out)."""

    bodies: int
    body_bytes: int
    outputs: int
    output_bytes: int
    objects: int
    object_bytes: int

    def describe(self) -> str:
        """One line for the command line."""
        return (
            f"{self.bodies} example bodies ({self.body_bytes:,} bytes), {self.outputs} case "
            f"outputs ({self.output_bytes:,} bytes in the database) and {self.objects} stored "
            f"objects ({self.object_bytes:,} bytes)"
        )


async def preview(
    sessionmaker: async_sessionmaker[AsyncSession], store: ObjectStore, older_than: timedelta
) -> RetentionPreview:
    """What `apply` with the same age would remove, counted and measured, removing nothing."""
    cutoff = datetime.now(UTC) - older_than
    async with sessionmaker() as session:
        bodies, body_bytes, outputs, output_bytes, keys = await repo.preview(session, cutoff)
    sizes = [await store.size(key) for key in keys]
    return RetentionPreview(bodies, body_bytes, outputs, output_bytes, len(keys), sum(sizes))


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
