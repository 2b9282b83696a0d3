"""Ingestion with one chunk's COPY under way while the next is built (app/repositories/cases.py,
CaseWriter): a service whose chunks are three rows long, so that every request below writes
several chunks, each started before the next batch is read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from app.api.main import create_app
from app.api.routers.body import VALUE_BATCH_LINES, ndjson_value_batches
from app.digest.canonical import canonical_bytes, digest_of
from app.platform.config import Settings
from app.repositories.cases import CaseWriter
from tests.conftest import Project
from tests.factories import case, define_suite, problem, start_evaluation
from tests.services.test_cases import NDJSON, stored

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

CHUNK_ROWS = 3


@pytest.fixture(scope="module")
async def chunked_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The service with three-row chunks."""
    application = create_app(settings.model_copy(update={"ingest_chunk_rows": CHUNK_ROWS}))
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def chunked(chunked_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=chunked_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://chunked") as http:
        yield http


@pytest.fixture
async def url_and_headers(
    project: Project, client: httpx.AsyncClient
) -> tuple[str, dict[str, str]]:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    return f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases", headers


def line_by_line(cases: list[dict[str, Any]]) -> Any:
    """An NDJSON body arriving one line at a time (each line is a batch of its own)."""

    async def pieces() -> AsyncIterator[bytes]:
        for item in cases:
            yield orjson.dumps(item) + b"\n"

    return pieces()


def cases_of(count: int) -> list[dict[str, Any]]:
    return [
        case("accuracy" if i < 12 else "no_harm", f"e{i % 12:02d}", output={"n": i})
        for i in range(count)
    ]


async def test_a_request_of_many_chunks_stores_every_case(
    chunked: httpx.AsyncClient, url_and_headers: tuple[str, dict[str, str]], db: Any
) -> None:
    url, headers = url_and_headers
    sent = cases_of(24)
    response = await chunked.post(url, content=line_by_line(sent), headers={**headers, **NDJSON})
    assert response.status_code == 200, response.text
    assert response.json() == {"accepted": 24, "unchanged": 0}
    evaluation_id = url.split("/")[-2]
    rows = await stored(db, evaluation_id)
    assert len(rows) == 24
    assert {row[5] for row in rows} == {canonical_bytes({"n": i}).decode() for i in range(24)}
    again = await chunked.post(url, content=line_by_line(sent), headers={**headers, **NDJSON})
    assert again.json() == {"accepted": 0, "unchanged": 24}


async def test_a_bad_line_after_chunks_were_written_leaves_nothing(
    chunked: httpx.AsyncClient, url_and_headers: tuple[str, dict[str, str]], db: Any
) -> None:
    url, headers = url_and_headers
    sent = cases_of(20)
    sent[17] = {**sent[17], "status": "passed"}
    response = await chunked.post(url, content=line_by_line(sent), headers={**headers, **NDJSON})
    body = problem(response, 422)
    assert body["index"] == 18
    assert await stored(db, url.split("/")[-2]) == []


async def test_a_conflict_in_a_later_chunk_is_named_and_nothing_is_kept(
    chunked: httpx.AsyncClient, url_and_headers: tuple[str, dict[str, str]], db: Any
) -> None:
    url, headers = url_and_headers
    first = await chunked.post(
        url, content=line_by_line(cases_of(12)[9:]), headers={**headers, **NDJSON}
    )
    assert first.json() == {"accepted": 3, "unchanged": 0}
    changed = cases_of(24)
    changed[10] = {**changed[10], "status": "fail"}
    response = await chunked.post(url, content=line_by_line(changed), headers={**headers, **NDJSON})
    body = problem(response, 409)
    assert body["index"] == 11 and "status" in body["detail"]
    assert len(await stored(db, url.split("/")[-2])) == 3


async def test_an_output_for_object_storage_waits_for_the_chunk_under_way(
    chunked: httpx.AsyncClient,
    url_and_headers: tuple[str, dict[str, str]],
    db: Any,
    chunked_app: FastAPI,
) -> None:
    # The large output's lock is taken on the request's connection while earlier chunks are
    # being written on it: without waiting, asyncpg refuses a second operation in progress.
    url, headers = url_and_headers
    large = {"text": "x" * 300_000}
    sent = cases_of(10)
    sent[7] = {**sent[7], "output": large}
    response = await chunked.post(url, content=line_by_line(sent), headers={**headers, **NDJSON})
    assert response.status_code == 200, response.text
    rows = await stored(db, url.split("/")[-2])
    assert len(rows) == 10
    (kept,) = [row for row in rows if row[6] == digest_of(large)]
    store = chunked_app.state.resources.object_store
    assert await store.get(kept[7]) == canonical_bytes(large)


async def test_a_full_chunk_is_written_while_the_caller_goes_on(chunked_app: FastAPI) -> None:
    """CaseWriter.add hands a full chunk to a task and returns before its COPY has ended; the
    chunk's failure comes out of idle()."""
    async with chunked_app.state.resources.sessionmaker() as session, session.begin():
        await session.execute(text("SELECT 1"))  # the transaction begins, as in a request
        writer = CaseWriter(session, CHUNK_ROWS)
        assert await writer.add(([], [], []))
        assert writer._writing is None  # nothing to write yet
        # Rows the COPY cannot encode (text where a uuid belongs).
        bad = [("not a uuid",) * 16] * CHUNK_ROWS
        assert await writer.add(([1, 2, 3], bad, []))
        assert writer._writing is not None and not writer._writing.done()
        with pytest.raises(ValueError, match="invalid UUID"):
            await writer.idle()
        await session.rollback()


class _WholeBody:
    """A request whose NDJSON body arrived whole, as one received chunk."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def stream(self) -> AsyncIterator[bytes]:
        yield self.body


async def test_a_body_that_arrived_whole_is_handed_on_in_batches_with_turns_between() -> None:
    """1,200 lines in one chunk come out as batches of VALUE_BATCH_LINES, numbered on, and the
    event loop runs other work (a chunk's COPY) between two batches."""
    lines = [orjson.dumps(case("accuracy", f"e{i % 12:02d}", i // 12)) for i in range(1200)]
    turns = 0

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    sizes, numbers, seen = [], [], []
    try:
        async for batch_numbers, batch in ndjson_value_batches(
            _WholeBody(b"\n".join(lines) + b"\n"), 1 << 20
        ):  # type: ignore[arg-type]
            assert len(batch_numbers) == len(batch)
            sizes.append(len(batch))
            numbers += batch_numbers
            seen.append(turns)
    finally:
        task.cancel()
    assert sizes == [VALUE_BATCH_LINES, VALUE_BATCH_LINES, 1200 - 2 * VALUE_BATCH_LINES]
    assert numbers == list(range(1, 1201))
    assert seen[0] < seen[1] < seen[2]
