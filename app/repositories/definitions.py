"""Scorer, dataset and suite versions."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import DatasetVersion, Example, ScorerVersion, Suite, SuiteVersion
from app.repositories import rows
from app.repositories.keyset import newest_first
from app.repositories.raw import driver_of


async def get_scorer(
    session: AsyncSession, project_id: uuid.UUID, name: str, version: str
) -> ScorerVersion | None:
    """One scorer version of a project."""
    result = await session.execute(
        select(ScorerVersion).where(
            ScorerVersion.project_id == project_id,
            ScorerVersion.name == name,
            ScorerVersion.version == version,
        )
    )
    return result.scalar_one_or_none()


async def insert_scorer_if_absent(session: AsyncSession, values: dict[str, object]) -> bool:
    """Insert a scorer version unless one with that name and version exists; True if inserted."""
    result = await session.execute(
        insert(ScorerVersion)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["project_id", "name", "version"])
        .returning(ScorerVersion.id)
    )
    return result.scalar_one_or_none() is not None


async def retire_scorer(session: AsyncSession, scorer_id: uuid.UUID) -> None:
    """Mark a scorer version retired (kept for reports)."""
    await session.execute(
        update(ScorerVersion)
        .where(ScorerVersion.id == scorer_id, ScorerVersion.retired_at.is_(None))
        .values(retired_at=datetime.now(UTC))
    )


async def scorers_named(
    session: AsyncSession, project_id: uuid.UUID, names: Sequence[str]
) -> list[ScorerVersion]:
    """Every version of the named scorers."""
    return await rows.every(
        session,
        ScorerVersion,
        rows.select_from(ScorerVersion) + " WHERE project_id = $1 AND name = any($2::text[])",
        project_id,
        list(names),
    )


async def get_dataset(
    session: AsyncSession, project_id: uuid.UUID, name: str, version: str
) -> DatasetVersion | None:
    """One dataset version of a project."""
    result = await session.execute(
        select(DatasetVersion).where(
            DatasetVersion.project_id == project_id,
            DatasetVersion.name == name,
            DatasetVersion.version == version,
        )
    )
    return result.scalar_one_or_none()


async def insert_dataset_if_absent(
    session: AsyncSession, values: dict[str, object], examples: list[dict[str, object]]
) -> bool:
    """Insert a dataset version and its examples unless it exists; True if inserted."""
    result = await session.execute(
        insert(DatasetVersion)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["project_id", "name", "version"])
        .returning(DatasetVersion.id)
    )
    if result.scalar_one_or_none() is None:
        return False
    for start in range(0, len(examples), 5000):
        await session.execute(insert(Example), examples[start : start + 5000])
    return True


async def list_examples(session: AsyncSession, dataset_version_id: uuid.UUID) -> list[Example]:
    """Every example of a dataset version, in id order."""
    result = await session.execute(
        select(Example)
        .where(Example.dataset_version_id == dataset_version_id)
        .order_by(Example.example_id)
    )
    return list(result.scalars())


async def example_index(
    session: AsyncSession, dataset_version_id: uuid.UUID
) -> list[tuple[str, list[str]]]:
    """(example id, tags) of a dataset version, in id order, without bodies (read by the
    driver: a dataset may hold millions of examples, and asyncpg decodes the arrays)."""
    rows = await (await driver_of(session)).fetch(
        "SELECT example_id, tags FROM examples WHERE dataset_version_id = $1 ORDER BY example_id",
        dataset_version_id,
    )
    return [(example_id, tags) for example_id, tags in rows]


async def get_suite(session: AsyncSession, project_id: uuid.UUID, name: str) -> Suite | None:
    """A suite of a project."""
    return await rows.one(
        session,
        Suite,
        rows.select_from(Suite) + " WHERE project_id = $1 AND name = $2",
        project_id,
        name,
    )


async def get_or_create_suite(session: AsyncSession, project_id: uuid.UUID, name: str) -> Suite:
    """The suite row, created on first use."""
    await session.execute(
        insert(Suite)
        .values(id=uuid.uuid4(), project_id=project_id, name=name)
        .on_conflict_do_nothing(index_elements=["project_id", "name"])
    )
    suite = await get_suite(session, project_id, name)
    assert suite is not None
    return suite


async def lock_suite(session: AsyncSession, suite_id: uuid.UUID) -> Suite:
    """Lock a suite row for an activation or a first version."""
    result = await session.execute(select(Suite).where(Suite.id == suite_id).with_for_update())
    return result.scalar_one()


async def get_suite_version(
    session: AsyncSession, suite_id: uuid.UUID, version: str
) -> SuiteVersion | None:
    """One version of a suite."""
    return await rows.one(
        session,
        SuiteVersion,
        rows.select_from(SuiteVersion) + " WHERE suite_id = $1 AND version = $2",
        suite_id,
        version,
    )


async def get_suite_version_by_id(
    session: AsyncSession, suite_version_id: uuid.UUID
) -> SuiteVersion | None:
    """A suite version by id."""
    return await rows.one(
        session, SuiteVersion, rows.select_from(SuiteVersion) + " WHERE id = $1", suite_version_id
    )


async def insert_suite_version_if_absent(session: AsyncSession, values: dict[str, object]) -> bool:
    """Insert a suite version unless it exists; True if inserted."""
    result = await session.execute(
        insert(SuiteVersion)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["suite_id", "version"])
        .returning(SuiteVersion.id)
    )
    return result.scalar_one_or_none() is not None


async def list_suite_versions(session: AsyncSession, suite_id: uuid.UUID) -> list[SuiteVersion]:
    """Every version of a suite, oldest first."""
    result = await session.execute(
        select(SuiteVersion)
        .where(SuiteVersion.suite_id == suite_id)
        .order_by(SuiteVersion.created_at, SuiteVersion.version)
    )
    return list(result.scalars())


async def set_active_version(
    session: AsyncSession, suite_id: uuid.UUID, suite_version_id: uuid.UUID
) -> None:
    """Make a version the suite's active one."""
    await session.execute(
        update(Suite).where(Suite.id == suite_id).values(active_version_id=suite_version_id)
    )
    await session.execute(
        update(SuiteVersion)
        .where(SuiteVersion.id == suite_version_id, SuiteVersion.activated_at.is_(None))
        .values(activated_at=datetime.now(UTC))
    )


VersionT = TypeVar("VersionT", ScorerVersion, DatasetVersion)


async def list_versions(
    session: AsyncSession,
    model: type[VersionT],
    project_id: uuid.UUID,
    name: str | None,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[VersionT]:
    """Scorer or dataset versions newest first (keyset on created_at, id), optionally of one
    name; one extra row tells there are more."""
    query = select(model).where(model.project_id == project_id)
    if name is not None:
        query = query.where(model.name == name)
    query = newest_first(query, model.created_at, model.id, after, limit + 1)
    return list((await session.execute(query)).scalars())


async def list_suites(
    session: AsyncSession,
    project_id: uuid.UUID,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[tuple[Suite, str | None]]:
    """Suites newest first (keyset on created_at, id) with their active version's name."""
    query = (
        select(Suite, SuiteVersion.version)
        .outerjoin(SuiteVersion, SuiteVersion.id == Suite.active_version_id)
        .where(Suite.project_id == project_id)
    )
    query = newest_first(query, Suite.created_at, Suite.id, after, limit + 1)
    return [(suite, version) for suite, version in (await session.execute(query)).all()]
