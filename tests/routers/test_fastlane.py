"""The fast lane of the hot reads answers exactly what the routed endpoints answer."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from app.api.fastlane import ReportReadFastLane
from app.api.main import create_app
from app.platform.config import Settings
from tests.conftest import Project, auth
from tests.factories import case, define_suite, problem, start_evaluation

SUBJECT = "sha1:0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
async def routed_only(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The same service with the fast lane off: every request goes through FastAPI."""
    application = create_app(settings.model_copy(update={"read_fast_lane": False}))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://routed") as http:
            yield http


async def issued(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    cases = [case("accuracy", "e01", output={"a": 1}), case("helpfulness", "e02", 1, score=0.5)]
    sent = await client.post(url + "/cases", json={"cases": cases}, headers=headers)
    assert sent.status_code == 200, sent.text
    answer = await client.post(url + "/finish", headers=headers)
    assert answer.status_code == 201, answer.text
    report_id: str = answer.json()["report_id"]
    return report_id


async def test_same_answers_with_and_without_the_fast_lane(
    project: Project, client: httpx.AsyncClient, routed_only: httpx.AsyncClient, app: FastAPI
) -> None:
    admin = await project.admin()
    report_id = await issued(client, admin)
    reader = auth(await project.token("report.read"))
    peer = auth(await project.token(kind="peer"))
    exporter = auth(await project.token("report.export"))
    requests: list[tuple[str, Any, dict[str, str]]] = [
        (f"/evaluations/api/reports/{report_id}", {}, reader),
        (f"/evaluations/api/reports/{report_id.replace('-', '')}", {}, reader),
        ("/evaluations/api/reports/forSubject", {"digest": SUBJECT}, reader),
        (
            "/evaluations/api/reports/forSubject",
            {"digest": SUBJECT, "include_expired": "true"},
            peer,
        ),
        ("/evaluations/api/reports/forSubject", {"digest": "sha1:none"}, reader),
        (
            "/evaluations/api/reports/forSubject",
            {"digest": SUBJECT, "include_expired": "1"},
            reader,
        ),
        # Everything below is refused, by the ordinary path in both cases.
        (f"/evaluations/api/reports/{report_id}", {}, {}),
        (f"/evaluations/api/reports/{report_id}", {}, {"Authorization": "Bearer evb_nope"}),
        (f"/evaluations/api/reports/{report_id}", {}, exporter),
        (f"/evaluations/api/reports/{report_id}", {}, peer),
        (f"/evaluations/api/reports/{uuid.uuid4()}", {}, reader),
        ("/evaluations/api/reports/forSubject", {}, reader),
        (
            "/evaluations/api/reports/forSubject",
            {"digest": SUBJECT, "include_expired": "maybe"},
            reader,
        ),
        ("/evaluations/api/reports/forSubject", {"digest": "x" * 301}, reader),
        # Case proofs: answered by the lane when in order, else by the routed endpoint.
        (f"/evaluations/api/reports/{report_id}/cases/accuracy/e01/0", {}, reader),
        (f"/evaluations/api/reports/{report_id}/cases/helpfulness/e02/1", {}, admin),
        (f"/evaluations/api/reports/{report_id}/cases/accuracy/e01/1", {}, reader),
        (f"/evaluations/api/reports/{report_id}/cases/nope/e01/0", {}, reader),
        (f"/evaluations/api/reports/{report_id}/cases/accuracy/e01/0", {"baseline": "1"}, reader),
        (f"/evaluations/api/reports/{report_id}/cases/accuracy/e01/0", {}, exporter),
        (f"/evaluations/api/reports/{report_id}/cases/accuracy/e01/0", {}, peer),
        (f"/evaluations/api/reports/{report_id}/cases/accuracy/e01/01", {}, reader),
        (f"/evaluations/api/reports/{uuid.uuid4()}/cases/accuracy/e01/0", {}, reader),
        # Lists: answered by the lane when every parameter is in order.
        ("/evaluations/api/reports", {}, reader),
        ("/evaluations/api/reports", {"subject_digest": SUBJECT, "limit": "1"}, reader),
        ("/evaluations/api/reports", {"suite": "rag", "status": "current"}, admin),
        ("/evaluations/api/reports", {"status": "superseded", "mode": "gate"}, reader),
        ("/evaluations/api/reports", {"result": "pass", "view": "summary"}, reader),
        ("/evaluations/api/reports", {"limit": "200", "subject_digest": ""}, reader),
        ("/evaluations/api/reports", {"limit": "050"}, reader),
        ("/evaluations/api/reports", {"cursor": "1.0123456789abcdef0123456789abcdef"}, reader),
        ("/evaluations/api/reports", {}, {}),
        ("/evaluations/api/reports", {}, peer),
        ("/evaluations/api/reports", {}, exporter),
        ("/evaluations/api/reports", {"limit": "0"}, reader),
        ("/evaluations/api/reports", {"limit": "201"}, reader),
        ("/evaluations/api/reports", {"limit": "ten"}, reader),
        ("/evaluations/api/reports", {"result": "great"}, reader),
        ("/evaluations/api/reports", {"view": "brief"}, reader),
        ("/evaluations/api/reports", {"suite": "x" * 201}, reader),
        ("/evaluations/api/reports", {"suite": "a\x00b"}, reader),
        ("/evaluations/api/reports", {"cursor": "garbage!"}, reader),
        ("/evaluations/api/reports", {"cursor": "1.0123456789abcdef0123456789abcdef\n"}, reader),
        ("/evaluations/api/reports", {"sort": "oldest"}, reader),
        ("/evaluations/api/reports", [("status", "current"), ("status", "superseded")], reader),
    ]
    for path, params, headers in requests:
        fast = await client.get(path, params=params, headers=headers)
        routed = await routed_only.get(path, params=params, headers=headers)
        assert fast.status_code == routed.status_code, (path, params, fast.text, routed.text)
        assert fast.headers["content-type"] == routed.headers["content-type"]
        if fast.status_code == 200:
            assert fast.json() == routed.json()
            assert fast.headers["content-length"] == routed.headers["content-length"]
        else:
            problem(fast, fast.status_code)


def counted(metrics: str, route: str) -> float:
    """The request counter of a route's 200 answers."""
    for line in metrics.splitlines():
        if (
            line.startswith("evalbook_http_requests_total{")
            and f'route="{route}",status="200"' in line
        ):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_fast_answers_are_counted_under_their_route(
    project: Project, client: httpx.AsyncClient
) -> None:
    admin = await project.admin()
    report_id = await issued(client, admin)
    reader = auth(await project.token("report.read"))
    paths = {
        "/evaluations/api/reports": ("/evaluations/api/reports", {"limit": "5"}),
        "/evaluations/api/reports/{report_id}": (f"/evaluations/api/reports/{report_id}", {}),
        "/evaluations/api/reports/forSubject": (
            "/evaluations/api/reports/forSubject",
            {"digest": SUBJECT},
        ),
    }
    before = (await client.get("/metrics")).text
    for path, params in paths.values():
        for _ in range(3):
            assert (await client.get(path, params=params, headers=reader)).status_code == 200
    after = (await client.get("/metrics")).text
    for template in paths:
        assert counted(after, template) - counted(before, template) == 3, template


async def test_the_lane_itself_answers_a_list_in_order(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    """The list is answered by the lane (not passed on) when the routed endpoint's query model
    takes its parameters."""
    admin = await project.admin()
    report_id = await issued(client, admin)
    secret = await project.token("report.read")
    lane = ReportReadFastLane(app)
    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "path": "/evaluations/api/reports",
        "query_string": b"limit=5&view=summary&status=current",
        "headers": [(b"authorization", f"Bearer {secret}".encode())],
        "app": app,
        "scheme": "http",
        "server": ("testserver", 80),
        "root_path": "",
    }
    answer = await lane._answer_for(scope)
    assert answer is not None and answer[0] == "/evaluations/api/reports"
    assert [r["report_id"] for r in orjson.loads(answer[1])["reports"]] == [report_id]
    # The lane reads the query with the routed endpoint's own model: what that model takes
    # (a page size of "050", an unknown parameter it ignores) the lane answers; what it refuses,
    # and a repeated parameter, the lane passes on.
    for query, answered in (
        (b"", True),
        (b"limit=050", True),
        (b"sort=oldest", True),
        (b"status=current&status=current", False),
        (b"view=brief", False),
        (b"limit=0", False),
    ):
        scope["query_string"] = query
        assert (await lane._answer_for(scope) is not None) == answered, query
