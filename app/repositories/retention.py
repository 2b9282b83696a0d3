"""The retention policy's SQL: remove bodies and outputs, keep every digest."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

BATCH_ROWS = 10_000
# Held shared by ingestion while it stores large outputs, exclusively by retention while it
# deletes unreferenced ones: a key being deleted is never referenced anew meanwhile.
OUTPUT_OBJECTS_LOCK = 0x6576616C626F6F6B  # "evalbook"

REMOVE_BODIES = text(
    """
UPDATE examples SET body = NULL, body_removed_at = now()
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM examples WHERE body IS NOT NULL AND created_at < :cutoff LIMIT :batch
))
"""
)
REMOVE_OUTPUTS = text(
    """
UPDATE cases SET output = NULL, output_removed_at = now()
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM cases
    WHERE output_removed_at IS NULL AND (output IS NOT NULL OR output_key IS NOT NULL)
      AND created_at < :cutoff
    LIMIT :batch
))
"""
)
UNREFERENCED_KEYS = text(
    """
SELECT output_key FROM cases WHERE output_removed_at IS NOT NULL AND output_key IS NOT NULL
EXCEPT
SELECT output_key FROM cases WHERE output_removed_at IS NULL AND output_key IS NOT NULL
"""
)
FORGET_KEYS = text(
    "UPDATE cases SET output_key = NULL"
    " WHERE output_removed_at IS NOT NULL AND output_key = ANY(:keys)"
)


async def remove_bodies(session: AsyncSession, cutoff: datetime) -> int:
    """Remove one batch of example bodies created before `cutoff`; how many."""
    result = await session.execute(REMOVE_BODIES, {"cutoff": cutoff, "batch": BATCH_ROWS})
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def remove_outputs(session: AsyncSession, cutoff: datetime) -> int:
    """Remove one batch of case outputs (inline or in object storage) created before `cutoff`."""
    result = await session.execute(REMOVE_OUTPUTS, {"cutoff": cutoff, "batch": BATCH_ROWS})
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def lock_output_objects(session: AsyncSession, *, shared: bool) -> None:
    """Take the output-objects lock until the end of the transaction."""
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    await session.execute(text(f"SELECT {function}(:key)"), {"key": OUTPUT_OBJECTS_LOCK})


async def unreferenced_keys(session: AsyncSession) -> list[str]:
    """Object keys only removed outputs still name."""
    return [row[0] for row in await session.execute(UNREFERENCED_KEYS)]


async def forget_keys(session: AsyncSession, keys: list[str]) -> None:
    """Clear the keys of objects that were deleted."""
    await session.execute(FORGET_KEYS, {"keys": keys})
