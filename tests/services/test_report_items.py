"""List pages read as versions, their reports rendered from those kept under each version
(app/services/kit/report_items.py), against the same pages read whole in one statement: the same
bytes for every filter, view and page; a change between the two reads of a page makes it read
again; a cache too small for a page, and expiry, as the whole read says."""

from __future__ import annotations

import json
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
from app.domain.reports import ListedView, ReportFilters
from app.platform.config import to_plain_url
from app.repositories import reads
from app.services import report_lists as service
from app.services.kit.report_items import ReportItems
from app.services.reports import join_representations
from tests.conftest import Project
from tests.factories import define_suite
from tests.services.test_list_cache import OPEN_INCIDENT, finished

FILTERS: list[dict[str, str | None]] = [
    {},
    {"status": "current"},
    {"status": "superseded"},
    {"suite": "rag"},
    {"suite": "rag", "status": "current"},
    {"mode": "gate"},
    {"mode": "gate", "status": "current"},
    {"result": "pass"},
    {"result": "pass", "status": "current"},
    {"subject_digest": f"sha1:{1:040x}"},
    {"subject_digest": f"sha1:{1:040x}", "status": "superseded"},
]


@pytest.fixture
async def history(
    project: Project, client: httpx.AsyncClient, database_url: str
) -> SimpleNamespace:
    """Six reports of one project: subject 1 issued three times (two superseded), subjects
    2 to 4 once each; the newest of subject 1 has an open incident."""
    admin = await project.admin()
    await define_suite(client, admin)
    ids = [await finished(client, admin, n) for n in (1, 2, 1, 3, 1, 4)]
    owner = await asyncpg.connect(to_plain_url(database_url))
    try:
        await owner.execute(OPEN_INCIDENT, project.id, uuid.UUID(ids[4]))
    finally:
        await owner.close()
    return SimpleNamespace(principal=SimpleNamespace(project_id=project.id), ids=ids)


async def page(
    reader: Any,
    principal: Any,
    filters: dict[str, str | None],
    *,
    items: ReportItems | None,
    limit: int = 2,
    cursor: str | None = None,
    view: str = "full",
    now: datetime | None = None,
) -> tuple[bytes, datetime | None]:
    """One list page as of `now`, read as versions with `items`, else whole."""
    return await service.render_list(
        reader,
        principal,
        "http://test",
        ReportFilters(**filters),
        limit,
        cursor,
        view,
        now or datetime.now(UTC),
        items,
    )


async def test_every_page_read_as_versions_is_the_page_read_whole(
    history: SimpleNamespace, app: FastAPI
) -> None:
    warm = ReportItems(1 << 24)
    async with state_of(app).reader_pool.acquire() as reader:
        for filters in FILTERS:
            for view in ("full", "summary"):
                cursor, seen = None, 0
                while True:
                    now = datetime.now(UTC)
                    whole, _ = await page(
                        reader,
                        history.principal,
                        filters,
                        items=None,
                        cursor=cursor,
                        view=view,
                        now=now,
                    )
                    for items in (ReportItems(1 << 24), warm, warm):
                        kept, _ = await page(
                            reader,
                            history.principal,
                            filters,
                            items=items,
                            cursor=cursor,
                            view=view,
                            now=now,
                        )
                        assert kept == whole, (filters, view, cursor)
                    document = orjson.loads(whole)
                    seen += len(document["reports"])
                    cursor = document["next_cursor"]
                    if cursor is None:
                        break
                if not filters:
                    assert seen == 6
    assert len(warm) == 6  # each report read once, under its one version


async def test_a_superseded_report_is_kept_again_under_its_new_version(
    history: SimpleNamespace, app: FastAPI, client: httpx.AsyncClient, project: Project
) -> None:
    items = ReportItems(1 << 24)
    async with state_of(app).reader_pool.acquire() as reader:
        before = orjson.loads((await page(reader, history.principal, {}, items=items, limit=10))[0])
        newest = before["reports"][0]
        assert newest["envelope"]["status"] == "current"
        renewed = await finished(client, await project.admin(), 4)  # subject 4 again
        after = orjson.loads((await page(reader, history.principal, {}, items=items, limit=10))[0])
        whole = orjson.loads((await page(reader, history.principal, {}, items=None, limit=10))[0])
    assert after == whole
    assert after["reports"][0]["report_id"] == renewed
    old = next(r for r in after["reports"] if r["report_id"] == newest["report_id"])
    assert old["envelope"]["status"] == "superseded"
    assert old["envelope"]["superseded_by"] == renewed
    assert len(items) == 8  # six, then the new report and the old one's superseded version


class SupersedesBetweenTheReads:
    """A reader on which a report is superseded (committed by another connection) right after
    the page's versions are read and before its reports are read by id."""

    def __init__(self, reader: Any, change: Any) -> None:
        self.reader, self.change, self.by_id = reader, change, 0

    async def fetch(self, sql: str, *args: Any) -> Any:
        if sql == reads.LISTED_BY_ID_SQL:
            self.by_id += 1
            if self.by_id == 1:
                await self.change()
        return await self.reader.fetch(sql, *args)


async def test_a_page_whose_reports_change_between_its_reads_is_read_again(
    history: SimpleNamespace, app: FastAPI, client: httpx.AsyncClient, project: Project
) -> None:
    admin = await project.admin()
    renewed: list[str] = []

    async def supersede() -> None:
        renewed.append(await finished(client, admin, 2))

    items = ReportItems(1 << 24)
    async with state_of(app).reader_pool.acquire() as reader:
        torn = SupersedesBetweenTheReads(reader, supersede)
        body, _ = await page(torn, history.principal, {}, items=items, limit=10)
        whole, _ = await page(reader, history.principal, {}, items=None, limit=10)
    assert torn.by_id == 2  # the first read by id met a changed row: the page was read again
    assert body == whole
    listed = orjson.loads(body)["reports"]
    assert listed[0]["report_id"] == renewed[0]
    statuses = {r["report_id"]: r["envelope"]["status"] for r in listed}
    assert statuses[history.ids[1]] == "superseded"


async def test_a_cache_too_small_for_a_page_reads_it_whole(
    history: SimpleNamespace, app: FastAPI
) -> None:
    tiny = ReportItems(1)
    async with state_of(app).reader_pool.acquire() as reader:
        whole, _ = await page(reader, history.principal, {}, items=None, limit=5)
        kept, _ = await page(reader, history.principal, {}, items=tiny, limit=5)
    assert kept == whole
    assert len(tiny) <= 1


class CountsReadsById:
    """A reader that counts the reads of reports by id."""

    def __init__(self, reader: Any) -> None:
        self.reader, self.by_id = reader, 0

    async def fetch(self, sql: str, *args: Any) -> Any:
        if sql == reads.LISTED_BY_ID_SQL:
            self.by_id += 1
        return await self.reader.fetch(sql, *args)


async def test_a_page_read_again_renders_the_reports_kept_under_the_versions_listed(
    history: SimpleNamespace, app: FastAPI
) -> None:
    items = ReportItems(1 << 24)
    project_id = history.principal.project_id
    async with state_of(app).reader_pool.acquire() as reader:
        counting = CountsReadsById(reader)
        first, _ = await page(counting, history.principal, {}, items=items, limit=10)
        again, _ = await page(counting, history.principal, {}, items=items, limit=10)
        versions = await reads.report_list_versions(reader, project_id, ReportFilters(), None, 10)
        ids = [reads.version_report_id(version) for version in versions]
        listed = await reads.listed_by_id(reader, project_id, ids)
    # Read by id once, for the first read; the second found every version it listed kept.
    assert counting.by_id == 1 and again == first
    # The versions the query writes are those the service writes for a report read by id.
    written = {
        view.id: reads.version_of(view.id, xmin, view.has_open_incident) for view, xmin in listed
    }
    assert versions == [written[report_id] for report_id in ids]
    assert [version.endswith(" t") for version in versions].count(True) == 1  # one open incident


@pytest.mark.parametrize("count", [0, 1, 2, 3, 50])
def test_a_page_joined_in_one_copy_is_its_fields_and_reports(count: int) -> None:
    rendered = [orjson.dumps({"report_id": str(n), "body": {"n": [n] * n}}) for n in range(count)]
    joined = join_representations(rendered, next_cursor="c" if count else None)
    assert json.loads(joined) == {
        "next_cursor": "c" if count else None,
        "reports": [json.loads(item) for item in rendered],
    }


async def test_kept_reports_say_expired_once_they_have(
    history: SimpleNamespace, app: FastAPI
) -> None:
    items = ReportItems(1 << 24)
    now = datetime.now(UTC)
    async with state_of(app).reader_pool.acquire() as reader:
        fresh, fresh_until = await page(reader, history.principal, {}, items=items, now=now)
        assert fresh_until is not None
        later = fresh_until + timedelta(seconds=1)
        stale, _ = await page(reader, history.principal, {}, items=items, now=later)
        whole, _ = await page(reader, history.principal, {}, items=None, now=later)
    assert stale == whole
    assert not any(r["envelope"]["expired"] for r in orjson.loads(fresh)["reports"])
    assert all(r["envelope"]["expired"] for r in orjson.loads(stale)["reports"])


async def test_reports_are_read_by_id_only_within_the_project(
    history: SimpleNamespace, app: FastAPI
) -> None:
    ids = [uuid.UUID(i) for i in history.ids]
    async with state_of(app).reader_pool.acquire() as reader:
        mine = await reads.listed_by_id(reader, history.principal.project_id, ids)
        other = await reads.listed_by_id(reader, uuid.uuid4(), ids)
    assert {view.id for view, _ in mine} == set(ids) and other == []


def _view(n: int, body: bytes) -> ListedView:
    now = datetime.now(UTC)
    return ListedView(
        uuid.UUID(int=n),
        "sha256:x",
        body,
        "current",
        None,
        None,
        None,
        now,
        False,
        None,
        now,
        "pass",
        "sha1:x",
        "gate",
        now,
    )


def test_the_least_recently_used_reports_go_first_past_the_size() -> None:
    items = ReportItems(max_bytes=2 * (100 + 256))
    first, second, third = (reads.version_of(uuid.UUID(int=n), 1, False) for n in (1, 2, 3))
    items.put(first, _view(1, b"a" * 100))
    items.put(second, _view(2, b"b" * 100))
    assert items.get(first) is not None  # now the most recent
    items.put(third, _view(3, b"c" * 100))
    assert len(items) == 2
    assert items.get(second) is None and items.get(first) is not None
    assert ReportItems(0).enabled is False
