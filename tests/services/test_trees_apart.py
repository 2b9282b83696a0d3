"""Large cases trees are recomputed by a program of their own (app/services/tree_verifying.py)
over its own connection, so that hashing them does not hold the service's interpreter; it
finds what the service would, the caller's transaction is kept alive meanwhile, a failed
program is verified in the service instead, and a cancelled caller stops the program."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.platform.config import Settings
from app.platform.metrics import Metrics
from app.services import integrity, tree_verifying
from app.services.kit.apart import ApartFailed, run_apart
from app.workers.sweep import sweep_once
from tests.conftest import Project
from tests.factories import first_report
from tests.services.test_integrity import flip_a_case_status

VERIFY = "/evaluations/api/reports/verify"


@pytest.fixture
def apart_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A report's trees of 5 cases or more (its accuracy check has 12) go to the program; the
    modules it was run as are recorded."""
    calls: list[str] = []

    async def recorded(module: str, request: bytes) -> bytes:
        calls.append(module)
        return await run_apart(module, request)

    monkeypatch.setattr(integrity, "APART_TREE_MIN", 5)
    monkeypatch.setattr(integrity, "APART_TOTAL_MIN", 5)
    monkeypatch.setattr(tree_verifying, "run_apart", recorded)
    return calls


async def test_a_tree_verified_apart_finds_what_the_service_finds(
    project: Project,
    client: httpx.AsyncClient,
    database_url: str,
    apart_calls: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept_alive: list[int] = []
    keep_alive = tree_verifying.repo.keep_alive

    async def counted(session: Any) -> None:
        kept_alive.append(1)
        await keep_alive(session)

    # Starting the program takes longer than this: the caller's transaction is kept busy.
    monkeypatch.setattr(tree_verifying, "KEEP_ALIVE_SECONDS", 0.05)
    monkeypatch.setattr(tree_verifying.repo, "keep_alive", counted)
    headers, report = await first_report(project, client)
    rid = report["report_id"]
    clean = (await client.post(VERIFY, json={"report_id": rid}, headers=headers)).json()
    assert clean["verified"] is True, clean
    committed = integrity.committed_trees(report["body"]["evaluation_id"], report["body"])
    assert any(tree.committed["count"] >= 5 for tree in committed)
    # One program for all of the report's large trees.
    assert apart_calls == [tree_verifying.PROGRAM]
    assert kept_alive
    await flip_a_case_status(database_url, report, {})
    tampered = (await client.post(VERIFY, json={"report_id": rid}, headers=headers)).json()
    assert tampered["failed"] == ["cases"], tampered
    assert any("accuracy: the case rows no longer hash" in f for f in tampered["findings"])
    assert len(apart_calls) == 2


async def test_the_sweep_verifies_large_trees_apart(
    project: Project,
    client: httpx.AsyncClient,
    db: Any,
    settings: Settings,
    database_url: str,
    apart_calls: list[str],
) -> None:
    headers, report = await first_report(project, client)
    await flip_a_case_status(database_url, report, {})
    every_report = settings.model_copy(
        update={"verify_sweep_every_hours": 1e-9, "verify_sweep_batch": 100_000}
    )
    swept = await sweep_once(db, every_report, Metrics())
    assert swept.swept and swept.failed >= 1 and apart_calls
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    (incident,) = [i for i in health["open_incidents"] if i["report_id"] == report["report_id"]]
    assert incident["kind"] == "cases_mismatch", incident


async def test_a_failed_program_leaves_the_tree_to_the_service(
    project: Project,
    client: httpx.AsyncClient,
    database_url: str,
    apart_calls: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(tree_verifying, "PROGRAM", "app.services.no_such_program")
    headers, report = await first_report(project, client)
    rid = report["report_id"]
    with caplog.at_level(logging.WARNING, logger=tree_verifying.__name__):
        clean = (await client.post(VERIFY, json={"report_id": rid}, headers=headers)).json()
    assert clean["verified"] is True, clean
    assert apart_calls and "apart failed" in caplog.text and "verifying them here" in caplog.text
    await flip_a_case_status(database_url, report, {})
    tampered = (await client.post(VERIFY, json={"report_id": rid}, headers=headers)).json()
    assert tampered["failed"] == ["cases"], tampered


async def test_a_program_that_fails_raises_with_its_last_error_line() -> None:
    with pytest.raises(ApartFailed, match="No module named"):
        await run_apart("app.services.no_such_program", b"{}")
    with pytest.raises(ApartFailed, match="exited with 1"):
        await run_apart("app.services.tree_verifying", b"not json")


async def test_a_cancelled_caller_stops_the_program(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    work = asyncio.ensure_future(run_apart("tests.services.apart_sleeper", str(pid_file).encode()))
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    os.kill(pid, 0)  # it runs
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await work
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
