"""Hardening, second round (input): lone surrogates in every body kind are a 422 with the
connection kept, problem documents never echo raw markup, every response says `nosniff`, a
client that leaves mid-body is a 499 (not an ERROR, not a 500), and no token is created with
more than the token creating it holds. Each against a served uvicorn process."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from itertools import product
from typing import Any

import httpx
import pytest

from app.api.main import create_app
from app.domain.vocabulary import ASSURANCE_LEVELS, ASSURANCE_RANK
from app.identity.auth import TOKEN_KINDS
from app.platform.config import Settings
from tests.conftest import Project, auth
from tests.factories import define_suite, start_evaluation
from tests.served import KeepAliveConnection, uvicorn_serving

NDJSON = {"content-type": "application/x-ndjson"}
JSON = {"content-type": "application/json"}


@pytest.fixture
async def served(settings: Settings) -> AsyncIterator[int]:
    """The app with the shared settings, served by uvicorn; yields the port."""
    async with uvicorn_serving(create_app(settings)) as port:
        yield port


def _case_line(output: str) -> bytes:
    return (
        b'{"check_id":"accuracy","example_id":"e00","repeat":0,"status":"pass","output":'
        + output.encode()
        + b"}\n"
    )


async def test_lone_surrogates_in_keys_and_values_are_422_with_the_connection_kept(
    served: int, project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = (await start_evaluation(client, headers))["evaluation_id"]
    token = {"authorization": headers["Authorization"]}
    bodies: list[tuple[str, str, dict[str, str], bytes]] = [
        ("POST", "/api/v1/evaluations", JSON, b'{"\\udc00": 1}'),
        ("POST", "/api/v1/evaluations", JSON, b'{"subject": {"digest": "\\ud800"}}'),
        ("PUT", "/api/v1/scorers/s/versions/1", JSON, b'{"definition": {"a\\udfff": 1}}'),
        (
            "PUT",
            "/api/v1/datasets/d/versions/1",
            NDJSON,
            b'{"id": "e0", "body": {"\\udc00": 1}}\n',
        ),
        ("PUT", "/api/v1/datasets/d/versions/1", NDJSON, b'{"id": "\\udc00", "body": {}}\n'),
        ("POST", f"/api/v1/evaluations/{evaluation}/cases", NDJSON, _case_line('{"\\udc00":1}')),
        ("POST", f"/api/v1/evaluations/{evaluation}/cases", NDJSON, _case_line('"\\ud800"')),
        (
            "POST",
            f"/api/v1/evaluations/{evaluation}/cases",
            JSON,
            b'{"cases": [{"\\udc00": 1}]}',
        ),
    ]
    connection = await KeepAliveConnection.open(served)
    try:
        for method, path, kind, body in bodies:
            answer = await connection.request(method, path, {**token, **kind}, body)
            assert answer.status == 422, (path, body, answer.body)
            problem = json.loads(answer.body.decode("utf-8"))  # valid UTF-8, valid JSON
            # A key is named with its surrogate spelled out; a value is not echoed.
            assert "\\ud" in problem["detail"] or "surrogate" in problem["detail"], problem
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert connection.kept_open
            assert (await connection.request("GET", "/healthz")).status == 200
    finally:
        await connection.close()
    listed = await client.get(f"/api/v1/evaluations/{evaluation}", headers=headers)
    assert listed.json()["received_cases"] == 0, listed.text


async def test_problems_never_echo_markup_and_every_response_says_nosniff(
    served: int, project: Project
) -> None:
    headers = await project.admin()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served}") as http:
        unknown = await http.get("/nope/<script>alert(1)</script>")
        assert unknown.status_code == 404
        assert b"<" not in unknown.content and b">" not in unknown.content
        assert json.loads(unknown.content)["instance"] == "/nope/%3Cscript%3Ealert(1)%3C/script%3E"
        media = await http.post(
            "/api/v1/evaluations",
            content=b"x",
            headers={**headers, "content-type": "text/<b>html</b>"},
        )
        assert media.status_code == 415 and b"<" not in media.content, media.content
        assert "text/<b>html</b>" in media.json()["detail"]  # the same text, escaped
        for answer in (
            unknown,
            media,
            await http.get("/healthz"),
            await http.get("/openapi.json"),
            await http.get("/metrics"),
            await http.get("/evaluations/api/reports", headers=headers),
            await http.get("/reports"),
            await http.get("/static/evalbook.css"),
        ):
            assert answer.headers.get("x-content-type-options") == "nosniff", answer.url


def _count(metrics: str, status: str) -> float:
    pattern = rf'evalbook_http_requests_total\{{method="POST",route="/api/v1/evaluations/{{evaluation_id}}/cases",status="{status}"\}} ([0-9.e+]+)'
    return sum(float(value) for value in re.findall(pattern, metrics))


async def test_a_client_leaving_mid_body_is_a_499_not_an_error(
    served: int, project: Project, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = (await start_evaluation(client, headers))["evaluation_id"]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served}") as http:
        before = (await http.get("/metrics")).text
        caplog.set_level(logging.INFO)
        for kind, part in ((NDJSON, _case_line('"4"')), (JSON, b'{"cases": [')):
            _reader, writer = await asyncio.open_connection("127.0.0.1", served)
            head = (
                f"POST /api/v1/evaluations/{evaluation}/cases HTTP/1.1\r\nhost: x\r\n"
                f"authorization: {headers['Authorization']}\r\n"
                f"content-type: {kind['content-type']}\r\ncontent-length: 100000\r\n\r\n"
            )
            writer.write(head.encode() + part)
            await writer.drain()
            await asyncio.sleep(0.3)
            writer.transport.abort()
        deadline = time.monotonic() + 20
        while True:  # the server notices each disconnect when it next reads the body
            after = (await http.get("/metrics")).text
            if _count(after, "499") - _count(before, "499") >= 2 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    assert _count(after, "499") - _count(before, "499") == 2, after
    assert _count(after, "500") == _count(before, "500")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.records
    listed = await client.get(f"/api/v1/evaluations/{evaluation}", headers=headers)
    assert listed.json()["received_cases"] == 0, listed.text


def _effective_cap(kind: str, cap: str) -> str:
    """What a token of this kind and stored cap may vouch for (users: at most `reported`)."""
    if kind == "user" and ASSURANCE_RANK[cap] > ASSURANCE_RANK["reported"]:
        return "reported"
    if kind == "labeller" and ASSURANCE_RANK[cap] > ASSURANCE_RANK["human_attested"]:
        return "human_attested"
    return cap


def _within(creator: tuple[str, str], kind: str, assurance: str | None) -> bool:
    """The rule, written from the contract: a new token holds no kind a user may not make and
    no assurance above its creator's own."""
    creator_kind, creator_cap = creator
    if creator_kind == "user" and kind in ("runner", "labeller"):
        return False
    own = _effective_cap(creator_kind, creator_cap)
    return assurance is None or ASSURANCE_RANK[assurance] <= ASSURANCE_RANK[own]


async def test_no_token_is_created_with_more_than_its_creator_holds(
    served: int, project: Project
) -> None:
    creators = list(product(("user", "runner"), ASSURANCE_LEVELS))
    secrets = {
        creator: await project.token("admin", kind=creator[0], assurance=creator[1])
        for creator in creators
    }
    narrow = await project.token("admin", "report.read", kind="runner", assurance="reported")
    outcomes: dict[tuple[Any, ...], int] = {}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{served}") as http:
        for creator, kind, assurance in product(creators, TOKEN_KINDS, (None, *ASSURANCE_LEVELS)):
            body: dict[str, Any] = {"name": "t", "permissions": ["report.read"], "kind": kind}
            if assurance is not None:
                body["assurance"] = assurance
            answer = await http.post("/api/v1/tokens", json=body, headers=auth(secrets[creator]))
            outcomes[creator, kind, assurance] = answer.status_code
            if not _within(creator, kind, assurance):
                assert answer.status_code == 403, (creator, kind, assurance, answer.text)
                assert "more than the token creating it" in answer.json()["detail"]
                continue
            assert answer.status_code == 201, (creator, kind, assurance, answer.text)
            made = answer.json()
            own = _effective_cap(*creator)
            assert ASSURANCE_RANK[_effective_cap(kind, made["assurance"])] <= ASSURANCE_RANK[own]
            assert set(made["permissions"]) <= {"report.read"}
        # A runner capped at `reported` never makes a platform-verified admin runner; an admin
        # token holding one more permission makes a token with it, not with one it lacks.
        escalation = {"name": "x", "permissions": ["admin"], "kind": "runner"}
        answer = await http.post(
            "/api/v1/tokens",
            json={**escalation, "assurance": "platform_verified"},
            headers=auth(secrets["user", "reported"]),
        )
        assert answer.status_code == 403, answer.text
        held = await http.post(
            "/api/v1/tokens",
            json={"name": "y", "permissions": ["report.read", "admin"]},
            headers=auth(narrow),
        )
        assert held.status_code == 201, held.text
    assert sum(status == 403 for status in outcomes.values()) > 0
    assert sum(status == 201 for status in outcomes.values()) > 0
