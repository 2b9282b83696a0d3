"""Fixtures of the service tests that need more than the session's database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.platform.config import Settings, to_plain_url
from app.platform.db import ensure_service_login, migrate
from app.services.provisioning import provision
from tests.conftest import one_migration_at_a_time


@pytest.fixture
async def own_database(database_url: str, settings: Settings) -> AsyncIterator[tuple[str, str]]:
    """A fresh, migrated database on the test server, its keys registered by the owner as
    the shared app's are: (owner URL, the service login's URL)."""
    name = f"evalbook_insider_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(to_plain_url(database_url))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    owner = make_url(database_url).set(database=name).render_as_string(hide_password=False)
    with one_migration_at_a_time(database_url):
        await asyncio.to_thread(migrate, owner)
    await provision(owner, settings)
    service = await ensure_service_login(owner, f"evalbook_svc_{uuid.uuid4().hex[:10]}")
    yield owner, service
    admin = await asyncpg.connect(to_plain_url(database_url))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
