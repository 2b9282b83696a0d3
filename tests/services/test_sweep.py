"""Tampering is found without anyone asking: the background sweep re-verifies every report at
a bounded pace, one sweeper at a time across processes."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.platform.config import Settings
from app.platform.metrics import Metrics
from app.repositories.reports import SWEEP_LOCK
from app.workers.sweep import sweep_once
from tests.conftest import Project
from tests.factories import behind_the_triggers, define_suite, finished

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


async def test_the_sweep_finds_tampering_and_flags_it_everywhere(
    project: Project, client: httpx.AsyncClient, db: Any, settings: Settings, database_url: str
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    tampered = await finished(client, headers)
    rid = uuid.UUID(tampered["report_id"])
    await behind_the_triggers(
        database_url,
        rid,
        "UPDATE reports SET result = CASE WHEN result = 'pass' THEN 'fail' ELSE 'pass' END"
        " WHERE id = $1",
    )
    every_report = settings.model_copy(
        update={"verify_sweep_every_hours": 1e-9, "verify_sweep_batch": 100_000}
    )
    first = await sweep_once(db, every_report, Metrics())
    assert first.swept and first.verified >= 1 and first.failed >= 1
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    (incident,) = [i for i in health["open_incidents"] if i["report_id"] == str(rid)]
    assert incident["kind"] == "derived_mismatch"
    served = (await client.get(f"/evaluations/api/reports/{rid}", headers=headers)).json()
    assert served["envelope"]["integrity"] == "incident"
    digest = tampered["body"]["subject"]["digest"]
    gate = await client.get(f"/evaluations/api/reports/forSubject?digest={digest}", headers=headers)
    assert gate.json()["reports"] == []

    # Verified a moment ago: not due again for a day.
    daily = settings.model_copy(update={"verify_sweep_every_hours": 24.0})
    second = await sweep_once(db, daily, Metrics())
    assert second.swept and second.verified == 0


async def test_one_sweeper_at_a_time(db: Any, settings: Settings) -> None:
    async with db() as session, session.begin():
        await session.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": SWEEP_LOCK}
        )
        skipped = await sweep_once(db, settings, Metrics())
        assert skipped.swept is False and skipped.verified == 0
    assert (await sweep_once(db, settings, Metrics())).swept is True


async def test_a_running_service_sweeps_by_itself(
    project: Project, client: httpx.AsyncClient, settings: Settings, database_url: str
) -> None:
    import asyncio

    from app.api.main import create_app

    headers = await project.admin()
    await define_suite(client, headers)
    rid = uuid.UUID((await finished(client, headers))["report_id"])
    await behind_the_triggers(
        database_url, rid, "UPDATE reports SET body = body || ' '::bytea WHERE id = $1"
    )
    sweeping = create_app(
        settings.model_copy(
            update={
                "verify_sweep_enabled": True,
                "verify_sweep_every_hours": 1e-9,
                "verify_sweep_batch": 100_000,
                "verify_sweep_interval_seconds": 0.2,
            }
        )
    )
    async with sweeping.router.lifespan_context(sweeping):
        for _ in range(100):
            health = await client.get("/evaluations/api/health/evaluator", headers=headers)
            if any(i["report_id"] == str(rid) for i in health.json()["open_incidents"]):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the sweep did not find the tampered report")
