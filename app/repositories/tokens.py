"""Organizations, projects and tokens."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import ApiToken, Organization, Project


async def get_or_create_project(
    session: AsyncSession, organization_slug: str, project_slug: str
) -> tuple[Organization, Project, bool]:
    """Create the organization (if new) and the project; tell whether the project was new."""
    await session.execute(
        insert(Organization)
        .values(id=uuid.uuid4(), slug=organization_slug)
        .on_conflict_do_nothing(index_elements=["slug"])
    )
    organization = (
        await session.execute(select(Organization).where(Organization.slug == organization_slug))
    ).scalar_one()
    inserted = await session.execute(
        insert(Project)
        .values(id=uuid.uuid4(), organization_id=organization.id, slug=project_slug)
        .on_conflict_do_nothing(index_elements=["organization_id", "slug"])
        .returning(Project.id)
    )
    created = inserted.scalar_one_or_none() is not None
    project = (
        await session.execute(
            select(Project).where(
                Project.organization_id == organization.id, Project.slug == project_slug
            )
        )
    ).scalar_one()
    return organization, project, created


async def find_project(
    session: AsyncSession, organization_slug: str, project_slug: str
) -> Project | None:
    """The project `ORG/PROJECT`, if it exists."""
    result = await session.execute(
        select(Project)
        .join(Organization, Organization.id == Project.organization_id)
        .where(Organization.slug == organization_slug, Project.slug == project_slug)
    )
    return result.scalar_one_or_none()


async def add_token(session: AsyncSession, token: ApiToken) -> ApiToken:
    """Store a new token row."""
    session.add(token)
    await session.flush()
    return token
