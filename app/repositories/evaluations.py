"""Evaluations."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Evaluation


async def get(
    session: AsyncSession, project_id: uuid.UUID, evaluation_id: uuid.UUID
) -> Evaluation | None:
    """An evaluation of a project."""
    result = await session.execute(
        select(Evaluation).where(
            Evaluation.id == evaluation_id, Evaluation.project_id == project_id
        )
    )
    return result.scalar_one_or_none()


async def get_for_ingestion(
    session: AsyncSession, project_id: uuid.UUID, evaluation_id: uuid.UUID
) -> Evaluation | None:
    """An evaluation locked FOR SHARE: batches run side by side, finish (FOR UPDATE) waits."""
    result = await session.execute(
        select(Evaluation)
        .where(Evaluation.id == evaluation_id, Evaluation.project_id == project_id)
        .with_for_update(read=True)
    )
    return result.scalar_one_or_none()


async def get_by_idempotency_key(
    session: AsyncSession, project_id: uuid.UUID, key: str
) -> Evaluation | None:
    """The evaluation a start with this Idempotency-Key created."""
    result = await session.execute(
        select(Evaluation).where(
            Evaluation.project_id == project_id, Evaluation.idempotency_key == key
        )
    )
    return result.scalar_one_or_none()


async def insert_if_key_absent(session: AsyncSession, values: dict[str, object]) -> bool:
    """Insert an evaluation; with an idempotency key already used, insert nothing."""
    result = await session.execute(
        insert(Evaluation)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["project_id", "idempotency_key"])
        .returning(Evaluation.id)
    )
    return result.scalar_one_or_none() is not None
