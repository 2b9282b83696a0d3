"""A finish reads a small suite's cases on its own transaction's connection and a large one's
on the read pool, several checks at once (Settings.finish_pooled_reads_from): both give the
same report."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.main import create_app
from app.platform.config import Settings
from app.repositories import case_columns
from app.services import report_measures
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


async def test_a_failed_read_leaves_the_measures_read_ended() -> None:
    """When a check's read fails, the measures' read on the transaction's connection is
    cancelled and has ended before the failure reaches the finish (which rolls back on that
    connection); when the reads succeed, both results come back."""
    ended: list[str] = []

    async def measures() -> dict[tuple[str, str], memoryview]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        ended.append("ran to its end")
        return {}

    async def failing_reads() -> list[int]:
        await asyncio.sleep(0.01)
        raise RuntimeError("a check's read failed")

    finishing = asyncio.ensure_future(report_measures.alongside(failing_reads(), measures()))
    # Not a timing: a measures' read left running would hold the failure back for its 30 s.
    await asyncio.wait({finishing}, timeout=5)
    assert finishing.done(), "the failure waited for the measures' read to run out"
    with pytest.raises(RuntimeError, match="a check's read failed"):
        finishing.result()
    assert ended == ["cancelled"]

    async def streams() -> dict[tuple[str, str], memoryview]:
        return {("accuracy", "latency_ms"): memoryview(b"")}

    async def reads() -> list[int]:
        return [1, 2]

    assert await report_measures.alongside(reads(), streams()) == (
        [1, 2],
        {("accuracy", "latency_ms"): memoryview(b"")},
    )
