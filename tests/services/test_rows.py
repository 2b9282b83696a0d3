"""Plain SQL on a session's connection (app/repositories/raw.py, rows.py): inside the
session's transaction from its first statement, and rows as the ORM would write them."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from app.models import Evaluation
from app.platform.config import to_plain_url
from app.repositories import rows
from app.repositories.raw import driver_of

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


async def test_a_first_driver_statement_runs_in_the_sessions_transaction(
    db, database_url: str
) -> None:
    key = uuid.uuid4().int % 2**62
    other = await asyncpg.connect(to_plain_url(database_url))
    try:
        async with db() as session:
            driver = await driver_of(session)
            assert driver.is_in_transaction()
            # A transaction lock outlives its statement only inside a transaction.
            await driver.execute("SELECT pg_advisory_xact_lock($1)", key)
            assert await other.fetchval("SELECT pg_try_advisory_xact_lock($1)", key) is False
            assert await driver_of(session) is driver
            await session.commit()
            assert not driver.is_in_transaction()
        assert await other.fetchval("SELECT pg_try_advisory_xact_lock($1)", key) is True
    finally:
        await other.close()


def test_an_insert_fills_in_the_python_defaults_the_orm_would() -> None:
    values = rows._with_defaults(Evaluation.__table__, {"subject": "{}"})  # type: ignore[arg-type]
    assert values["status"] == "running"
    assert isinstance(values["id"], uuid.UUID)
    # Server defaults (created_at) are left to the database.
    assert "created_at" not in values
    assert rows._with_defaults(Evaluation.__table__, {"status": "finished"})["status"] == (  # type: ignore[arg-type]
        "finished"
    )
