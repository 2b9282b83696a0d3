"""Hardening, second round (slow clients and links): stalled NDJSON uploads cost nobody else
a connection, request heads are bounded in size, fields and time, a stalled or refusing
object store is a 503 within the Retry-After the service announces (and /readyz answers
within 2 s), and PostgreSQL ends a session left idle inside a transaction. Each against a
served uvicorn process, on the real database and moto behind a proxy the test controls."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

import httpx
import pytest
import sqlalchemy.exc
from sqlalchemy import text

from app.api.main import create_app
from app.api.serving import HeadLimits
from app.platform.config import Settings
from app.platform.db import build_engine, build_sessionmaker
from tests.conftest import MotoServer, Project
from tests.factories import define_suite, start_evaluation
from tests.proxy import StoreOutageProxy
from tests.served import uvicorn_serving


async def _status_of(reader: asyncio.StreamReader) -> tuple[int, float]:
    """The status of the answer on a raw connection, and when it came."""
    line = await asyncio.wait_for(reader.readline(), 60)
    return int(line.split()[1]), time.monotonic()


def _case(example: str, output: Any = "4") -> dict[str, Any]:
    return {"check_id": "accuracy", "example_id": example, "repeat": 0, "status": "pass",
            "output": output}  # fmt: skip


async def test_fifty_stalled_uploads_cost_every_other_request_nothing(
    settings: Settings, project: Project, client: httpx.AsyncClient
) -> None:
    served = settings.model_copy(
        update={"body_idle_seconds": 10.0, "ingest_streams": 4, "ingest_stream_wait_seconds": 8.0}
    )
    headers = await project.admin()
    await define_suite(client, headers)
    stalled_evaluation = (await start_evaluation(client, headers))["evaluation_id"]
    line = json.dumps(_case("e00")).encode() + b"\n"
    async with uvicorn_serving(create_app(served)) as port:
        streams = []
        for _ in range(50):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                f"POST /api/v1/evaluations/{stalled_evaluation}/cases HTTP/1.1\r\nhost: x\r\n"
                f"authorization: {headers['Authorization']}\r\n"
                "content-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
                f"{len(line):x}\r\n".encode()
                + line
                + b"\r\n"
            )
            streams.append((reader, writer))
        answers = [asyncio.ensure_future(_status_of(reader)) for reader, _ in streams]
        await asyncio.sleep(0.5)  # the first four hold their turns, the others wait for one
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            assert (await http.get("/readyz")).status_code == 200
            other = await start_evaluation(http, headers, subject={"digest": "sha1:" + "1" * 40})
            evaluation = other["evaluation_id"]
            cases = await http.post(
                f"/api/v1/evaluations/{evaluation}/cases",
                json={"cases": [_case(f"e{i:02d}") for i in range(12)]},
                headers=headers,
            )
            assert cases.status_code == 200, cases.text
            finished = await http.post(f"/api/v1/evaluations/{evaluation}/finish", headers=headers)
            assert finished.status_code == 201, finished.text
            report = await http.get(
                f"/evaluations/api/reports/{finished.json()['report_id']}", headers=headers
            )
            assert report.status_code == 200
            others_done = time.monotonic()
        outcomes = await asyncio.gather(*answers)
        for _, writer in streams:
            writer.close()
    statuses = Counter(status for status, _ in outcomes)
    # The four holding a turn are answered 408 when their body stops; the rest, 503 after
    # waiting for a turn. Everyone else was answered before any of them.
    assert statuses[408] >= 4 and statuses[408] + statuses[503] == 50, statuses
    assert others_done < min(at for _, at in outcomes)
    stalled = await client.get(f"/api/v1/evaluations/{stalled_evaluation}", headers=headers)
    assert stalled.json()["received_cases"] == 0


async def test_postgresql_ends_a_session_idle_in_a_transaction(
    settings: Settings, database_url: str
) -> None:
    engine = build_engine(
        settings.model_copy(update={"db_idle_in_transaction_timeout_ms": 1000}), database_url
    )
    try:
        async with build_sessionmaker(engine)() as session:
            await session.execute(text("SELECT 1"))
            await asyncio.sleep(2.0)
            with pytest.raises(sqlalchemy.exc.DBAPIError):
                await session.execute(text("SELECT 1"))
    finally:
        await engine.dispose()


async def _raw(port: int, data: bytes, *, pause: float = 0.0) -> tuple[int | None, bytes]:
    """Send `data` (then wait `pause`), read until the server closes: (status, answer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for start in range(0, len(data), 16384):
            writer.write(data[start : start + 16384])
            await writer.drain()
    except ConnectionError:
        pass  # refused before the whole head was sent
    if pause:
        await asyncio.sleep(pause)
    answer = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    status = int(answer.split()[1]) if answer.startswith(b"HTTP/1.1") else None
    return status, answer


async def test_request_heads_are_bounded_in_size_fields_and_time(settings: Settings) -> None:
    limits = HeadLimits(max_bytes=8192, max_fields=20, timeout_seconds=1.0)
    async with uvicorn_serving(create_app(settings), limits) as port:
        for head in (
            b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 65536 + b"\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * (4 << 20) + b"\r\n\r\n",
            b"GET /healthz?" + b"q" * 10000 + b" HTTP/1.1\r\nhost: x\r\n\r\n",
            b"GET /healthz HTTP/1.1\r\n"
            + b"".join(b"x-%d: 1\r\n" % i for i in range(30))
            + b"\r\n",
        ):
            status, answer = await _raw(port, head)
            assert status == 431, answer[:300]
            body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
            assert body["status"] == 431 and b"nosniff" in answer
        fine = b"GET /healthz HTTP/1.1\r\nhost: x\r\n" + b"".join(
            b"x-%d: 1\r\n" % i for i in range(18)
        )
        status, answer = await _raw(port, fine + b"connection: close\r\n\r\n")
        assert status == 200, answer
        # A head dripped past its time is answered 408; a connection that sends nothing is
        # closed; a keep-alive connection between requests is not timed by the head's limit.
        started = time.monotonic()
        status, answer = await _raw(port, b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        assert status == 408 and time.monotonic() - started < 10, answer
        status, answer = await _raw(port, b"")
        assert (status, answer) == (None, b"")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await http.get("/healthz")).status_code == 200
            await asyncio.sleep(1.5)
            assert (await http.get("/healthz")).status_code == 200


@pytest.fixture
async def store_proxy(moto_server: MotoServer) -> Any:
    proxy = StoreOutageProxy(moto_server.port)
    await proxy.start()
    yield proxy
    await proxy.stop()


async def test_a_store_outage_is_a_503_within_its_retry_after(
    settings: Settings, project: Project, client: httpx.AsyncClient, store_proxy: StoreOutageProxy
) -> None:
    served = settings.model_copy(
        update={
            "s3_endpoint_url": store_proxy.url,
            "s3_connect_timeout_seconds": 1.0,
            "s3_read_timeout_seconds": 1.0,
            "s3_max_attempts": 2,
            "inline_output_limit_bytes": 64,
        }
    )
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = (await start_evaluation(client, headers))["evaluation_id"]
    big = {"answer": "x" * 200}  # stored in the object store, not inline
    async with (
        uvicorn_serving(create_app(served)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http,
    ):
        assert (await http.get("/readyz")).status_code == 200
        for outage in (store_proxy.stall, store_proxy.outage):
            await outage()
            started = time.monotonic()
            refused = await http.post(
                f"/api/v1/evaluations/{evaluation}/cases",
                json={"cases": [_case("e00", big)]},
                headers=headers,
            )
            took = time.monotonic() - started
            assert refused.status_code == 503, refused.text
            retry_after = int(refused.headers["retry-after"])
            assert retry_after == served.store_outage_seconds
            assert took <= retry_after, (outage.__name__, took, retry_after)
            started = time.monotonic()
            ready = await http.get("/readyz")
            assert ready.status_code == 503 and time.monotonic() - started < 2.0, ready.text
            assert "object store" in ready.json()["detail"]
            await store_proxy.restore()
        accepted = await http.post(
            f"/api/v1/evaluations/{evaluation}/cases",
            json={"cases": [_case("e00", big)]},
            headers=headers,
        )
        assert accepted.status_code == 200, accepted.text
        assert (await http.get("/readyz")).status_code == 200
