"""Evaluations (plain SQL on the session's connection: `rows`)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Evaluation
from app.repositories import rows
from app.repositories.raw import driver_of

_BY_ID = rows.select_from(Evaluation) + " WHERE id = $1 AND project_id = $2"


async def get(
    session: AsyncSession, project_id: uuid.UUID, evaluation_id: uuid.UUID
) -> Evaluation | None:
    """An evaluation of a project."""
    return await rows.one(session, Evaluation, _BY_ID, evaluation_id, project_id)


async def get_for_ingestion(
    session: AsyncSession, project_id: uuid.UUID, evaluation_id: uuid.UUID
) -> Evaluation | None:
    """An evaluation locked FOR SHARE: batches run side by side, finish (FOR UPDATE) waits."""
    return await rows.one(session, Evaluation, _BY_ID + " FOR SHARE", evaluation_id, project_id)


async def lock(
    session: AsyncSession, project_id: uuid.UUID, evaluation_id: uuid.UUID
) -> Evaluation | None:
    """The evaluation locked FOR UPDATE: waits for running batches, blocks new ones."""
    return await rows.one(session, Evaluation, _BY_ID + " FOR UPDATE", evaluation_id, project_id)


async def get_by_idempotency_key(
    session: AsyncSession, project_id: uuid.UUID, key: str
) -> Evaluation | None:
    """The evaluation a start with this Idempotency-Key created."""
    return await rows.one(
        session,
        Evaluation,
        rows.select_from(Evaluation) + " WHERE project_id = $1 AND idempotency_key = $2",
        project_id,
        key,
    )


async def insert_if_key_absent(session: AsyncSession, values: dict[str, object]) -> bool:
    """Insert an evaluation; with an idempotency key already used, insert nothing."""
    inserted = await rows.insert(
        session,
        Evaluation,
        values,
        " ON CONFLICT (project_id, idempotency_key) DO NOTHING RETURNING id",
    )
    return inserted is not None


async def close(session: AsyncSession, evaluation: Evaluation, status: str, at: datetime) -> None:
    """Mark an evaluation finished or cancelled (and the detached instance with it)."""
    driver = await driver_of(session)
    await driver.execute(
        "UPDATE evaluations SET status = $2, finished_at = $3 WHERE id = $1",
        evaluation.id,
        status,
        at,
    )
    evaluation.status = status
    evaluation.finished_at = at
