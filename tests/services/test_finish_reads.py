"""A finish reads a small suite's cases on its own transaction's connection and a large one's
on the read pool, several checks at once (Settings.finish_pooled_reads_from): both give the
same report."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.main import create_app
from app.platform.config import Settings
from app.repositories import case_columns
from tests.conftest import Project
from tests.factories import define_suite, finished
from tests.services.test_measures_api import COST, issue_with, measured_cases, measured_suite

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
async def default_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The service with the default threshold (the shared app reads every suite on the pool)."""
    defaults = Settings.model_fields["finish_pooled_reads_from"].default
    application = create_app(settings.model_copy(update={"finish_pooled_reads_from": defaults}))
    async with application.router.lifespan_context(application):
        yield application


def _outcome(report: dict[str, Any]) -> list[dict[str, Any]]:
    """What a report found, without what names this one report."""
    body = report["body"]
    return [body["result"], *body["checks"]]


async def test_both_paths_read_the_same_cases(
    project: Project,
    client: httpx.AsyncClient,
    default_app: FastAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copy_columns = case_columns.copy_columns
    in_transaction: list[bool] = []

    async def watched(connection: Any, *args: Any) -> Any:
        in_transaction.append(connection.is_in_transaction())
        return await copy_columns(connection, *args)

    monkeypatch.setattr(case_columns, "copy_columns", watched)
    headers = await project.admin()
    await define_suite(client, headers)
    pooled = await finished(client, headers)
    # Pooled: each check's read opens its own read-only transaction on a pooled connection.
    assert in_transaction == [False, False, False]
    in_transaction.clear()
    transport = httpx.ASGITransport(app=default_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://default") as own:
        subject = {"digest": "sha1:" + "ab" * 20, "repo": "acme/web"}
        alone = await finished(own, headers, subject=subject)
    # The suite's 48 expected cases are below the default threshold: read inside the finish.
    assert in_transaction == [True, True, True]
    assert pooled["report_id"] != alone["report_id"]
    assert _outcome(pooled) == _outcome(alone)


async def test_both_paths_read_the_same_measures(
    project: Project,
    client: httpx.AsyncClient,
    default_app: FastAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A suite with measure checks: the pooled read takes its measures on the transaction's
    connection while the checks are read, the small suite's read after them; both decide the
    measure checks alike."""
    copy_measure = case_columns.copy_measure
    measure_reads: list[tuple[str, bool]] = []

    async def watched(connection: Any, evaluation_id: Any, check_id: str, name: str) -> Any:
        measure_reads.append((name, connection.is_in_transaction()))
        return await copy_measure(connection, evaluation_id, check_id, name)

    monkeypatch.setattr(case_columns, "copy_measure", watched)
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite("threshold", COST))
    pooled = await issue_with(client, headers, measured_cases())
    assert measure_reads == [("cost_usd", True), ("latency_ms", True)]
    measure_reads.clear()
    transport = httpx.ASGITransport(app=default_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://default") as own:
        subject = {"digest": "sha1:" + "cd" * 20, "repo": "acme/web"}
        alone = await issue_with(own, headers, measured_cases(), subject=subject)
    assert measure_reads == [("cost_usd", True), ("latency_ms", True)]
    assert _unseeded(pooled) == _unseeded(alone)
    measured = [c for c in alone["body"]["checks"] if "measure" in c]
    assert [c["status"] for c in measured] == ["pass", "pass"]
    assert measured[0]["interval"]["method"].startswith("order_statistic")


def _unseeded(report: dict[str, Any]) -> list[dict[str, Any]]:
    """`_outcome` without the bootstrap intervals, whose seed each evaluation draws anew."""
    return [
        {k: v for k, v in item.items() if k != "interval" or "seed" not in (v or {})}
        if isinstance(item, dict)
        else item
        for item in _outcome(report)
    ]
