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
# A case whose output retention removes: not yet removed, created before the cutoff, and with
# an output somewhere (inline, in `case_outputs`, or under an object key). Used by the removal
# and by its preview, which must pick the same rows.
_REMOVABLE_OUTPUT = """
        c.output_removed_at IS NULL AND c.created_at < :cutoff
          AND (c.output IS NOT NULL OR c.output_key IS NOT NULL OR EXISTS (
              SELECT 1 FROM case_outputs o WHERE o.evaluation_id = c.evaluation_id
                AND o.check_id = c.check_id AND o.example_id = c.example_id
                AND o.repeat = c.repeat))"""
# Cases whose output (inline in the row or in `case_outputs`, or an object key) is removed are
# marked; inline outputs are cleared or deleted. The digest stays: the case's leaf commits to it.
# Rows are named by their key, not their ctid: `cases` is partitioned, and a ctid names a row
# only within its partition.
REMOVE_OUTPUTS = text(
    f"""
WITH marked AS (
    UPDATE cases SET output = NULL, output_removed_at = now()
    WHERE (evaluation_id, check_id, example_id, repeat) IN (
        SELECT c.evaluation_id, c.check_id, c.example_id, c.repeat FROM cases c
        WHERE {_REMOVABLE_OUTPUT}
        LIMIT :batch
    )
    RETURNING evaluation_id, check_id, example_id, repeat
), deleted AS (
    DELETE FROM case_outputs o USING marked m
    WHERE o.evaluation_id = m.evaluation_id AND o.check_id = m.check_id
      AND o.example_id = m.example_id AND o.repeat = m.repeat
)
SELECT count(*) FROM marked
"""
)
UNREFERENCED_KEYS = text(
    """
SELECT output_key FROM cases WHERE output_removed_at IS NOT NULL AND output_key IS NOT NULL
EXCEPT
SELECT output_key FROM cases WHERE output_removed_at IS NULL AND output_key IS NOT NULL
"""
)
# What a run with this cutoff would remove, and its bytes: the same rows REMOVE_BODIES and
# REMOVE_OUTPUTS pick (all batches at once), and the object keys only those outputs name.
PREVIEW = text(
    f"""
WITH doomed AS (
    SELECT c.evaluation_id, c.check_id, c.example_id, c.repeat, c.output, c.output_key
    FROM cases c
    WHERE {_REMOVABLE_OUTPUT}
), keys AS (
    SELECT output_key FROM doomed WHERE output_key IS NOT NULL
    UNION
    SELECT output_key FROM cases WHERE output_removed_at IS NOT NULL AND output_key IS NOT NULL
    EXCEPT
    SELECT c.output_key FROM cases c
    WHERE c.output_removed_at IS NULL AND c.output_key IS NOT NULL
      AND NOT (c.created_at < :cutoff)
)
SELECT
    (SELECT count(*) FROM examples WHERE body IS NOT NULL AND created_at < :cutoff),
    (SELECT coalesce(sum(octet_length(body)), 0) FROM examples
     WHERE body IS NOT NULL AND created_at < :cutoff),
    (SELECT count(*) FROM doomed),
    (SELECT coalesce(sum(octet_length(d.output)), 0) + coalesce(sum(octet_length(o.output)), 0)
     FROM doomed d LEFT JOIN case_outputs o ON o.evaluation_id = d.evaluation_id
       AND o.check_id = d.check_id AND o.example_id = d.example_id AND o.repeat = d.repeat),
    (SELECT array_agg(output_key) FROM keys)
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
    return int(result.scalar_one())


async def lock_output_objects(session: AsyncSession, *, shared: bool) -> None:
    """Take the output-objects lock until the end of the transaction."""
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    await session.execute(text(f"SELECT {function}(:key)"), {"key": OUTPUT_OBJECTS_LOCK})


async def unreferenced_keys(session: AsyncSession) -> list[str]:
    """Object keys only removed outputs still name."""
    return [row[0] for row in await session.execute(UNREFERENCED_KEYS)]


async def preview(session: AsyncSession, cutoff: datetime) -> tuple[int, int, int, int, list[str]]:
    """What removing everything before `cutoff` would take: (bodies, their bytes, outputs,
    their bytes in the database, the object keys that would be deleted)."""
    row = (await session.execute(PREVIEW, {"cutoff": cutoff})).one()
    return int(row[0]), int(row[1]), int(row[2]), int(row[3]), list(row[4] or [])


async def forget_keys(session: AsyncSession, keys: list[str]) -> None:
    """Clear the keys of objects that were deleted."""
    await session.execute(FORGET_KEYS, {"keys": keys})
