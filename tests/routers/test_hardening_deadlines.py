"""Hardening, third round (deadlines): whole operations have deadlines, not single reads. A
store that stops reading, NDJSON streams that drip, a peer that drips its answer and a session
PostgreSQL ended each cost a bounded time, and nobody else anything. Each against a served
uvicorn process, on the real database and moto behind a proxy the test controls (loopback)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from app.api.main import create_app
from app.platform.config import Settings
from tests.conftest import MotoServer, Project
from tests.factories import EXAMPLE_IDS, define_suite, start_evaluation
from tests.proxy import StoreOutageProxy
from tests.served import uvicorn_serving

pytestmark = pytest.mark.server


def _case(example: str, output: Any = "4", check: str = "accuracy", repeat: int = 0) -> bytes:
    return json.dumps(
        {
            "check_id": check,
            "example_id": example,
            "repeat": repeat,
            "status": "pass",
            "output": output,
        }
    ).encode()


def _server_errors(metrics: str, route: str) -> int:
    """Requests to `route` that /metrics counts as answered 5xx other than 503."""
    pattern = re.compile(r"^evalbook_http_requests_total\{(.*)\} (\S+)$", re.M)
    total = 0
    for labels, value in pattern.findall(metrics):
        if f'route="{route}"' in labels and re.search(r'status="5(?!03)', labels):
            total += int(float(value))
    return total


async def _ndjson_upload(
    port: int, path: str, authorization: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection on which a chunked NDJSON upload's head has been sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: {authorization}\r\n"
        "content-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n"
        "connection: close\r\n\r\n".encode()
    )
    return reader, writer


async def _two_evaluations(
    client: httpx.AsyncClient, project: Project, digit: str
) -> tuple[dict[str, str], str, str]:
    """The standard suite, and two running evaluations of it (two subjects): the admin's
    headers and their ids."""
    headers = await project.admin()
    await define_suite(client, headers)
    first = (await start_evaluation(client, headers))["evaluation_id"]
    second = await start_evaluation(client, headers, subject={"digest": "sha1:" + digit * 40})
    return headers, first, second["evaluation_id"]


async def _drip(port: int, path: str, authorization: str, every: float, count: int) -> int:
    """An NDJSON upload that sends a byte every `every` seconds: the status it is answered."""
    reader, writer = await _ndjson_upload(port, path, authorization)
    line = _case("e00") + b"\n"
    try:
        for i in range(count):
            writer.write(b"1\r\n" + line[i % len(line) : i % len(line) + 1] + b"\r\n")
            await writer.drain()
            try:
                status_line = await asyncio.wait_for(reader.readline(), every)
            except TimeoutError:
                continue
            return int(status_line.split()[1])
        return 0
    except ConnectionError:
        return int((await reader.readline()).split()[1])
    finally:
        writer.close()


async def test_dripping_streams_give_back_their_turns_while_another_upload_succeeds(
    settings: Settings, project: Project, client: httpx.AsyncClient
) -> None:
    served = settings.model_copy(
        update={
            "ingest_line_seconds": 2.0,
            "body_idle_seconds": 10.0,
            "ingest_stream_wait_seconds": 8.0,
        }
    )
    headers, dripped, other = await _two_evaluations(client, project, "2")
    path = f"/api/v1/evaluations/{dripped}/cases"
    async with (
        uvicorn_serving(create_app(served)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        # Eight drips, a byte every 0.5 s (each byte within the 10 s idle limit): every
        # ingest turn of the process is held by one.
        started = time.monotonic()
        drips = [
            asyncio.ensure_future(_drip(port, path, headers["Authorization"], 0.5, 60))
            for _ in range(served.ingest_streams)
        ]
        await asyncio.sleep(0.5)
        body = b"\n".join(_case(example) for example in EXAMPLE_IDS) + b"\n"
        upload = await http.post(
            f"/api/v1/evaluations/{other}/cases",
            content=body,
            headers={**headers, "content-type": "application/x-ndjson"},
        )
        uploaded = time.monotonic() - started
        statuses = await asyncio.gather(*drips)
        refused = time.monotonic() - started
    # The drips are answered 408 once no complete line came for 2 s; the upload, waiting for
    # a turn, then gets one and is stored.
    assert upload.status_code == 200 and upload.json()["accepted"] == 12, upload.text
    assert statuses == [408] * served.ingest_streams
    assert uploaded < 6.0 and refused < 6.0, (uploaded, refused)
    stalled = await client.get(f"/api/v1/evaluations/{dripped}", headers=headers)
    assert stalled.json()["received_cases"] == 0


async def _paced_upload(
    port: int, path: str, authorization: str, lines: list[bytes], every: float
) -> tuple[int, bytes]:
    """An NDJSON upload that sends one line every `every` seconds, until it is answered (a
    refusal may come before the end): (status, body)."""
    reader, writer = await _ndjson_upload(port, path, authorization)
    head = None
    with contextlib.suppress(ConnectionError):
        for data in lines:
            chunk = data + b"\n"
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), every)
                break
        else:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    if head is None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))  # type: ignore[union-attr]
    body = await asyncio.wait_for(reader.readexactly(length), 30)
    writer.close()
    return int(head.split()[1]), body


async def test_a_slow_steady_stream_is_stored_and_an_ended_session_is_a_quiet_503(
    settings: Settings, project: Project, client: httpx.AsyncClient
) -> None:
    # PostgreSQL ends a session idle in its transaction for 1 s: a stream of one line every
    # 0.4 s for 6 s is stored whole (its rows are written every 0.3 s); one that pauses 2.5 s
    # (within its line limit, past PostgreSQL's) is answered 503, and counted as one.
    served = settings.model_copy(
        update={
            "db_idle_in_transaction_timeout_ms": 1000,
            "ingest_flush_seconds": 0.3,
            "ingest_line_seconds": 5.0,
            "body_idle_seconds": 10.0,
        }
    )
    headers, steady, paused = await _two_evaluations(client, project, "3")
    lines = [_case(example) for example in EXAMPLE_IDS[:6]]
    lines += [_case(example, check="no_harm") for example in EXAMPLE_IDS[:9]]
    async with (
        uvicorn_serving(create_app(served)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        auth = headers["Authorization"]
        path = f"/api/v1/evaluations/{steady}/cases"
        status, body = await _paced_upload(port, path, auth, lines, 0.4)
        assert status == 200 and json.loads(body)["accepted"] == 15, body
        path = f"/api/v1/evaluations/{paused}/cases"
        status, body = await _paced_upload(port, path, auth, lines[:2], 2.5)
        assert status == 503, body
        problem = json.loads(body)
        assert problem["status"] == 503 and "database" in problem["detail"]
        # The retry that works: the same lines again, at the pace the docs name.
        status, body = await _paced_upload(port, path, auth, lines[:2], 0.1)
        assert status == 200 and json.loads(body)["accepted"] == 2, body
        await asyncio.sleep(0.5)
        metrics = (await http.get("/metrics")).text
    assert _server_errors(metrics, "/api/v1/evaluations/{evaluation_id}/cases") == 0


async def _deaf_store_app(settings: Settings, proxy: StoreOutageProxy) -> Settings:
    return settings.model_copy(
        update={
            "s3_endpoint_url": proxy.url,
            "s3_connect_timeout_seconds": 1.0,
            "s3_read_timeout_seconds": 1.0,
            "s3_max_attempts": 1,
            "bundle_upload_seconds": 6.0,
            "db_pool_size": 5,
            "db_max_overflow": 0,
        }
    )


@pytest.fixture
async def deaf_proxy(moto_server: MotoServer) -> Any:
    proxy = StoreOutageProxy(moto_server.port, receive_buffer=4096)
    await proxy.start()
    yield proxy
    await proxy.stop()


async def test_a_store_that_stops_reading_costs_25_exports_a_deadline_and_nobody_else_anything(
    settings: Settings, project: Project, client: httpx.AsyncClient, deaf_proxy: StoreOutageProxy
) -> None:
    served = await _deaf_store_app(settings, deaf_proxy)
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = (await start_evaluation(client, headers))["evaluation_id"]
    # About 3 MB of incompressible outputs: a bundle far larger than what the sockets buffer.
    cases = [
        json.loads(_case(e, base64.b64encode(os.urandom(180_000)).decode(), check, repeat))
        for check, repeats in (("accuracy", 1), ("no_harm", 1))
        for repeat in range(repeats)
        for e in EXAMPLE_IDS
    ]
    for start in range(0, len(cases), 6):
        stored = await client.post(
            f"/api/v1/evaluations/{evaluation}/cases",
            json={"cases": cases[start : start + 6]},
            headers=headers,
        )
        assert stored.status_code == 200, stored.text
    report = (await client.post(f"/api/v1/evaluations/{evaluation}/cancel", headers=headers)).json()
    report_id = report["report_id"]
    async with (
        uvicorn_serving(create_app(served)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as http,
    ):
        # The store stops reading in the middle of the first export's first part: that
        # export is answered 503 at its deadline, having held no pooled session meanwhile.
        await deaf_proxy.stop_reading(after_bytes=256 * 1024)
        started = time.monotonic()
        first = await http.post("/evaluations/api/reports/bundle", json={"report_id": report_id})
        assert first.status_code == 503, first.text
        assert "object store" in first.json()["detail"] and first.headers["retry-after"]
        assert 2.0 < time.monotonic() - started < served.bundle_upload_seconds + 5
        # Then 25 at once, against the store that still reads nothing: while they wait on it,
        # every other endpoint answers (this process also builds the 25 bundles meanwhile, so
        # "at once" is a few seconds on a loaded 2-core machine).
        started = time.monotonic()
        exports = [
            asyncio.ensure_future(
                http.post("/evaluations/api/reports/bundle", json={"report_id": report_id})
            )
            for _ in range(25)
        ]
        await asyncio.sleep(1.0)
        start_body = {
            "subject": {"digest": "sha1:" + "4" * 40},
            "suite": {"name": "rag"},
            "mode": "gate",
            "execution_mode": "platform",
        }
        for method, path, body in (
            ("GET", f"/evaluations/api/reports/{report_id}", None),
            ("GET", "/evaluations/api/reports/bundles", None),
            ("POST", "/api/v1/evaluations", start_body),
        ):
            asked = time.monotonic()
            answer = await http.request(method, path, json=body)
            assert answer.status_code in (200, 201), answer.text
            assert time.monotonic() - asked < 5.0, path
        answers = await asyncio.gather(*exports)
        took = time.monotonic() - started
        statuses = Counter(answer.status_code for answer in answers)
        assert statuses == {503: 25}, (statuses, answers[0].text)
        assert took < served.bundle_upload_seconds + 10, took
        await deaf_proxy.restore()
        after = await http.post("/evaluations/api/reports/bundle", json={"report_id": report_id})
        assert after.status_code == 201, after.text
        listed = (await http.get(f"/evaluations/api/reports/bundles?report_id={report_id}")).json()
        assert len(listed["bundles"]) == 1, "a refused export leaves no record"


async def test_a_stream_whose_session_postgresql_ended_gives_back_its_turn_at_once(
    settings: Settings, project: Project, client: httpx.AsyncClient
) -> None:
    # One ingest turn. A stream sends a line and pauses, well within its line limit (20 s);
    # PostgreSQL ends its idle session after 1 s, and at that moment the stream is answered
    # 503 and its turn goes to the upload waiting for it.
    served = settings.model_copy(
        update={
            "ingest_streams": 1,
            "ingest_stream_wait_seconds": 8.0,
            "db_idle_in_transaction_timeout_ms": 1000,
            "ingest_line_seconds": 20.0,
            "body_idle_seconds": 30.0,
        }
    )
    headers, paused, other = await _two_evaluations(client, project, "5")
    async with (
        uvicorn_serving(create_app(served)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        path = f"/api/v1/evaluations/{paused}/cases"
        reader, writer = await _ndjson_upload(port, path, headers["Authorization"])
        line = _case("e00") + b"\n"
        writer.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        await writer.drain()
        started = time.monotonic()
        await asyncio.sleep(0.3)
        waiting = asyncio.ensure_future(
            http.post(
                f"/api/v1/evaluations/{other}/cases",
                content=b"\n".join(_case(example) for example in EXAMPLE_IDS),
                headers={**headers, "content-type": "application/x-ndjson"},
            )
        )
        answer = await asyncio.wait_for(reader.read(), 10)
        ended = time.monotonic() - started
        writer.close()
        uploaded = await waiting
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), answer
    assert b"ended this request's session" in body
    assert ended < 4.0, ended
    assert uploaded.status_code == 200 and uploaded.json()["accepted"] == 12, uploaded.text
