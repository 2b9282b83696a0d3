"""Report list pages are kept under the project's list stamp and never served once stale.

The stamp (migration 0016) moves at the commit of every change to a project's envelopes or
incidents; a page is served again only to a request that reads the same stamp and only until
the first of its reports expires. These tests fill the cache, change what a page shows in each
way a page can change (a new report, a supersession, an incident), and read the page again;
one races issuance against a stream of list reads through the real database.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from fastapi import FastAPI

from app.api.state import state_of
from app.domain.reports import ReportFilters
from app.platform.config import to_plain_url
from app.services import report_lists as service
from app.services.kit.list_cache import ListCache
from tests.conftest import Project
from tests.factories import behind_the_triggers, case, define_suite, start_evaluation

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

LIST = "/evaluations/api/reports"
# An incident opened by hand, as the verification sweep would ($1 project, $2 report).
OPEN_INCIDENT = (
    "INSERT INTO incidents (project_id, report_id, kind, stored_digest, computed_digest, detail)"
    " VALUES ($1, $2, 'digest_mismatch', 'a', 'b', 'test')"
)


def subject(n: int) -> dict[str, str]:
    return {"digest": f"sha1:{n:040x}", "repo": "acme/web"}


async def finished(client: httpx.AsyncClient, headers: dict[str, str], n: int) -> str:
    """Finish a gate evaluation of subject `n`; the report's id."""
    evaluation = await start_evaluation(client, headers, subject=subject(n))
    cases = [case(check, f"e{i:02d}") for check in ("accuracy", "no_harm") for i in range(12)]
    response = await client.post(
        f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases",
        json={"cases": cases},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    response = await client.post(
        f"/api/v1/evaluations/{evaluation['evaluation_id']}/finish", headers=headers
    )
    assert response.status_code == 201, response.text
    report_id: str = response.json()["report_id"]
    return report_id


async def listed(
    client: httpx.AsyncClient, headers: dict[str, str], **params: Any
) -> list[dict[str, Any]]:
    response = await client.get(LIST, params={"limit": 5, **params}, headers=headers)
    assert response.status_code == 200, response.text
    reports: list[dict[str, Any]] = response.json()["reports"]
    return reports


async def test_a_kept_page_is_served_again_and_not_after_a_new_report(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    admin = await project.admin()
    await define_suite(client, admin)
    first = await finished(client, admin, 1)
    pages = state_of(app).list_pages
    kept = len(pages)
    one = await client.get(LIST, params={"limit": 5}, headers=admin)
    assert len(pages) == kept + 1
    again = await client.get(LIST, params={"limit": 5}, headers=admin)
    assert again.content == one.content
    assert len(pages) == kept + 1
    second = await finished(client, admin, 2)
    assert [r["report_id"] for r in await listed(client, admin)] == [second, first]


async def test_a_supersession_and_an_incident_change_a_kept_page(
    project: Project, client: httpx.AsyncClient, database_url: str
) -> None:
    admin = await project.admin()
    await define_suite(client, admin)
    old = await finished(client, admin, 3)
    assert [r["report_id"] for r in await listed(client, admin, status="current")] == [old]
    assert (await listed(client, admin))[0]["envelope"]["status"] == "current"
    new = await finished(client, admin, 3)  # the same subject again: `old` is superseded
    assert [r["report_id"] for r in await listed(client, admin, status="current")] == [new]
    statuses = {r["report_id"]: r["envelope"]["status"] for r in await listed(client, admin)}
    assert statuses == {new: "current", old: "superseded"}
    assert (await listed(client, admin))[0]["envelope"]["integrity"] == "ok"
    await behind_the_triggers(
        database_url, uuid.UUID(new), "UPDATE reports SET body = body || ' '::bytea WHERE id = $1"
    )
    verified = await client.post(LIST + "/verify", json={"report_id": new}, headers=admin)
    assert verified.status_code == 200, verified.text
    integrity = {r["report_id"]: r["envelope"]["integrity"] for r in await listed(client, admin)}
    assert integrity == {new: "incident", old: "ok"}


async def test_pages_are_kept_per_project_and_per_request(
    project: Project, other_project: Project, client: httpx.AsyncClient
) -> None:
    admin, other = await project.admin(), await other_project.admin()
    await define_suite(client, admin)
    mine = await finished(client, admin, 4)
    assert [r["report_id"] for r in await listed(client, admin)] == [mine]
    assert await listed(client, other) == []
    summary = await listed(client, admin, view="summary")
    assert [r["report_id"] for r in summary] == [mine] and "body" not in summary[0]
    assert "body" in (await listed(client, admin))[0]


async def test_the_stamp_moves_at_commit_and_only_its_trigger_sets_it(
    project: Project, client: httpx.AsyncClient, database_url: str, service_url: str
) -> None:
    admin = await project.admin()
    await define_suite(client, admin)
    report_id = uuid.UUID(await finished(client, admin, 5))
    owner = await asyncpg.connect(to_plain_url(database_url))
    watcher = await asyncpg.connect(to_plain_url(database_url))
    stamp = "SELECT stamp FROM report_list_stamps WHERE project_id = $1"
    try:
        project_id = await owner.fetchval("SELECT project_id FROM reports WHERE id = $1", report_id)
        before = await watcher.fetchval(stamp, project_id)
        assert before >= 1
        async with owner.transaction():
            await owner.execute(
                OPEN_INCIDENT,
                project_id,
                report_id,
            )
            # Deferred to commit: nothing moves while the change is uncommitted.
            assert await watcher.fetchval(stamp, project_id) == before
        assert await watcher.fetchval(stamp, project_id) == before + 1
    finally:
        await owner.close()
        await watcher.close()
    as_service = await asyncpg.connect(service_url)
    try:
        assert await as_service.fetchval(stamp, project_id) == before + 1
        for statement in (
            "UPDATE report_list_stamps SET stamp = stamp - 1 WHERE project_id = $1",
            "DELETE FROM report_list_stamps WHERE project_id = $1",
            "INSERT INTO report_list_stamps VALUES ($1, 0)",
        ):
            with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError):
                await as_service.execute(statement, project_id)
    finally:
        await as_service.close()


async def test_issuing_races_a_stream_of_list_reads(
    project: Project, client: httpx.AsyncClient
) -> None:
    """Lists read continuously while reports are issued: a list asked for after an issuance
    returned holds that report, whatever the stream kept meanwhile."""
    admin = await project.admin()
    await define_suite(client, admin)
    done = asyncio.Event()
    reads = 0

    async def stream() -> None:
        nonlocal reads
        while not done.is_set():
            for params in ({}, {"status": "current"}, {"view": "summary"}):
                await listed(client, admin, **params)
                reads += 1

    readers = [asyncio.create_task(stream()) for _ in range(3)]
    try:
        issued: list[str] = []
        for n in range(6):
            issued.insert(0, await finished(client, admin, 100 + n))
            for params in ({}, {"status": "current"}, {"view": "summary"}):
                got = [r["report_id"] for r in await listed(client, admin, **params)]
                assert got == issued[:5], (n, params)
    finally:
        done.set()
        await asyncio.gather(*readers)
    assert reads >= 6


class CommitsAfterTheRead:
    """A reader that lets another connection commit a change right after the page's query,
    before anything else the service reads: the moment a stamp read after the page would miss."""

    def __init__(self, reader: Any, change: Any) -> None:
        self.reader, self.change = reader, change

    async def fetchval(self, *args: Any) -> Any:
        return await self.reader.fetchval(*args)

    async def fetch(self, *args: Any) -> Any:
        rows = await self.reader.fetch(*args)
        await self.change()
        return rows


async def test_a_change_committed_while_a_page_is_read_is_not_hidden_by_it(
    project: Project, client: httpx.AsyncClient, app: FastAPI, database_url: str
) -> None:
    admin = await project.admin()
    await define_suite(client, admin)
    report_id = uuid.UUID(await finished(client, admin, 7))
    principal: Any = SimpleNamespace(project_id=project.id)  # all a page reads of its principal
    cache = ListCache(1 << 20)

    async def incident() -> None:
        owner = await asyncpg.connect(to_plain_url(database_url))
        try:
            await owner.execute(
                OPEN_INCIDENT,
                project.id,
                report_id,
            )
        finally:
            await owner.close()

    async def page(reader: Any) -> list[dict[str, Any]]:
        body = await service.list_reports(
            reader,
            principal,
            ReportFilters(),
            public_base_url="http://test",
            limit=5,
            cursor=None,
            cache=cache,
        )
        return _reports(body)

    async with state_of(app).reader_pool.acquire() as reader:
        during = await page(CommitsAfterTheRead(reader, incident))
        assert during[0]["envelope"]["integrity"] == "ok"  # read before the incident
        after = await page(reader)
    assert after[0]["envelope"]["integrity"] == "incident"


async def test_a_kept_page_lasts_until_its_first_report_expires(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    admin = await project.admin()
    await define_suite(client, admin)
    await finished(client, admin, 6)
    state = state_of(app)
    principal: Any = SimpleNamespace(project_id=project.id)  # all a page reads of its principal
    now = datetime.now(UTC)
    async with state.reader_pool.acquire() as reader:
        body, fresh_until = await service.render_list(
            reader, principal, "http://test", ReportFilters(), 5, None, "summary", now
        )
    expires = [datetime.fromisoformat(r["envelope"]["expires_at"]) for r in _reports(body)]
    assert fresh_until == min(expires)
    later = fresh_until + timedelta(days=1)
    async with state.reader_pool.acquire() as reader:
        expired_page, none_left = await service.render_list(
            reader, principal, "http://test", ReportFilters(), 5, None, "summary", later
        )
    assert none_left is None
    assert all(r["envelope"]["expired"] for r in _reports(expired_page))


def _reports(body: bytes) -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = orjson.loads(body)["reports"]
    return reports


def test_the_cache_serves_a_page_only_under_its_stamp_and_before_its_expiry() -> None:
    cache = ListCache(max_bytes=100)
    now = datetime(2026, 12, 1, tzinfo=UTC)
    cache.put("a", 7, b"page-a", now + timedelta(hours=1))
    assert cache.get("a", 7, now) == b"page-a"
    assert cache.get("a", 8, now) is None  # the stamp moved: dropped
    assert cache.get("a", 7, now) is None
    cache.put("a", 7, b"page-a", now + timedelta(hours=1))
    assert cache.get("a", 7, now + timedelta(hours=1)) is None
    cache.put("b", 1, b"page-b", None)
    assert cache.get("b", 1, now + timedelta(days=3650)) == b"page-b"


def test_the_cache_drops_the_least_recently_used_past_its_size() -> None:
    cache = ListCache(max_bytes=10)
    cache.put("a", 1, b"aaaa", None)
    cache.put("b", 1, b"bbbb", None)
    assert cache.get("a", 1, datetime.now(UTC)) == b"aaaa"  # now the most recent
    cache.put("c", 1, b"cccc", None)
    assert len(cache) == 2
    assert cache.get("b", 1, datetime.now(UTC)) is None
    assert cache.get("a", 1, datetime.now(UTC)) == b"aaaa"
    cache.put("huge", 1, b"x" * 11, None)
    assert cache.get("huge", 1, datetime.now(UTC)) is None
    assert not ListCache(0).enabled and ListCache(1).enabled
