"""The HTTP edge: U+0000 refused everywhere text reaches the database, 405 with a full `Allow`,
failures answered inside the app (the connection stays open), the OpenAPI document complete,
pages that roll back what they flushed before failing."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import pytest
import sqlalchemy.exc
from fastapi import APIRouter
from sqlalchemy import text

from app.api.deps import Session
from app.api.failures import as_problem
from app.api.main import create_app
from app.api.routers.pages import PageRoute
from app.api.routers.route import EdgeRoute
from app.domain.errors import Conflict
from app.platform.config import Settings
from app.repositories import tokens as token_repo
from app.services import projects
from tests.conftest import Project, auth
from tests.factories import problem
from tests.served import KeepAliveConnection, uvicorn_serving

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

NUL = "\u0000"


@pytest.mark.parametrize(
    ("path", "params", "loc"),
    [
        ("/evaluations/api/reports", {"suite": f"a{NUL}"}, ["query", "suite"]),
        (
            "/evaluations/api/reports",
            {"subject_digest": f"sha1:{NUL}"},
            ["query", "subject_digest"],
        ),
        ("/evaluations/api/reports/forSubject", {"digest": NUL}, ["query", "digest"]),
    ],
)
async def test_nul_in_a_query_is_422_naming_it(
    project: Project, client: httpx.AsyncClient, path: str, params: dict[str, str], loc: list[str]
) -> None:
    headers = await project.admin()
    answer = problem(await client.get(path, params=params, headers=headers), 422)
    assert answer["errors"][0]["loc"] == loc
    assert "U+0000" in answer["errors"][0]["msg"]


async def rows_of(db: Any, project: Project) -> dict[str, int]:
    """How many rows of each table a refused write could have left, for the project."""
    counts = {}
    async with db() as session:
        for table in ("api_tokens", "peers", "scorer_versions", "dataset_versions"):
            counts[table] = await session.scalar(
                text(f"SELECT count(*) FROM {table} WHERE project_id = :p"), {"p": project.id}
            )
    return counts


@pytest.mark.parametrize(
    ("method", "path", "body", "loc"),
    [
        (
            "POST",
            "/api/v1/peers",
            {"name": NUL, "callback_url": "https://x.test/h"},
            ["body", "name"],
        ),
        ("POST", "/api/v1/tokens", {"name": f"t{NUL}", "permissions": []}, ["body", "name"]),
        (
            "PUT",
            "/api/v1/datasets/d/versions/1",
            {"examples": [{"id": "e1", "body": {}, "tags": [f"lang{NUL}"]}]},
            ["body", "examples", 0, "tags", 0],
        ),
        (
            "PUT",
            "/api/v1/scorers/s/versions/1",
            {"definition": {"kind": f"exact{NUL}"}},
            ["body", "definition", "kind"],
        ),
        (
            "PUT",
            "/api/v1/scorers/s/versions/1",
            {"definition": {f"k{NUL}": 1}},
            ["body", "definition", f"k{NUL}"],
        ),
    ],
)
async def test_nul_in_a_body_is_422_naming_the_field(
    project: Project,
    client: httpx.AsyncClient,
    db: Any,
    method: str,
    path: str,
    body: dict[str, Any],
    loc: list[Any],
) -> None:
    headers = await project.admin()
    answer = problem(await client.request(method, path, json=body, headers=headers), 422)
    assert answer["errors"][0]["loc"] == loc
    assert "U+0000" in answer["errors"][0]["msg"]
    assert await rows_of(db, project) == {
        "api_tokens": 1,
        "peers": 0,
        "scorer_versions": 0,
        "dataset_versions": 0,
    }


async def test_nul_in_an_ndjson_example_is_422_naming_the_line(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = {**(await project.admin()), "Content-Type": "application/x-ndjson"}
    lines = (
        b'{"id": "e1", "body": {}, "tags": []}\n{"id": "e2", "body": {}, "tags": ["a\\u0000"]}\n'
    )
    answer = problem(
        await client.put("/api/v1/datasets/d/versions/1", content=lines, headers=headers), 422
    )
    assert answer["errors"][0]["loc"] == ["line 2", "tags", 0]
    assert problem(await client.get("/api/v1/datasets/d/versions/1", headers=headers), 404)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/evaluations/api/reports/verify", "POST"),
        ("GET", "/evaluations/api/reports/bundle", "POST"),
        ("POST", "/api/v1/scorers/s/versions/1", "DELETE, GET, PUT"),
        ("DELETE", "/api/v1/evaluations", "POST"),
        ("PUT", "/evaluations/api/reports/00000000-0000-4000-8000-000000000000", "GET"),
    ],
)
async def test_405_names_every_allowed_method(
    client: httpx.AsyncClient, method: str, path: str, allowed: str
) -> None:
    answer = await client.request(method, path)
    assert answer.status_code == 405, answer.text
    assert answer.headers["allow"] == allowed
    assert answer.headers["content-type"] == "application/problem+json"


def test_outages_and_bugs_are_told_apart() -> None:
    driver = asyncpg.exceptions.CannotConnectNowError("the database system is shutting down")
    adapted = Exception("the adapter's error")
    adapted.__cause__ = driver
    shutting_down = sqlalchemy.exc.DBAPIError("SELECT 1", None, adapted)
    unavailable = as_problem(shutting_down)
    assert unavailable.status == 503 and unavailable.headers["Retry-After"] == "1"
    assert as_problem(ConnectionRefusedError()).status == 503
    bug = as_problem(KeyError("x"))
    assert bug.status == 500 and "Retry-After" not in bug.headers
    syntax = sqlalchemy.exc.ProgrammingError("SELEC", None, Exception("syntax error"))
    assert as_problem(syntax).status == 500


def _app_with_failing_routes(settings: Settings) -> Any:
    app = create_app(settings)
    router = APIRouter(route_class=EdgeRoute)

    @router.get("/test/bug")
    async def bug() -> None:
        raise RuntimeError("a genuine bug")

    @router.get("/test/outage")
    async def outage() -> None:
        adapted = Exception("adapter")
        adapted.__cause__ = asyncpg.exceptions.CannotConnectNowError("shutting down")
        raise sqlalchemy.exc.DBAPIError("SELECT 1", None, adapted)

    app.include_router(router)
    return app


async def test_the_connection_stays_open_after_a_500_and_a_503(settings: Settings) -> None:
    async with uvicorn_serving(_app_with_failing_routes(settings)) as port:
        connection = await KeepAliveConnection.open(port)
        try:
            bug = await connection.request("GET", "/test/bug")
            assert bug.status == 500 and connection.kept_open
            assert b"genuine" not in bug.body
            assert (await connection.request("GET", "/healthz")).status == 200
            outage = await connection.request("GET", "/test/outage")
            assert outage.status == 503 and outage.headers["retry-after"] == "1"
            assert connection.kept_open
            assert (await connection.request("GET", "/healthz")).status == 200
        finally:
            await connection.close()


async def test_a_failed_page_rolls_back_what_it_flushed(
    settings: Settings, db: Any, client: httpx.AsyncClient
) -> None:
    app = create_app(settings)
    router = APIRouter(route_class=PageRoute)
    path = f"org-{uuid.uuid4().hex[:8]}/rolled-back"

    @router.get("/test/flush-then-fail")
    async def flush_then_fail(session: Session) -> None:
        await projects.create_project(session, path)
        raise Conflict("failed after a flush")

    app.include_router(router)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            page = await http.get("/test/flush-then-fail")
    assert page.status_code == 409
    assert page.headers["content-type"].startswith("text/html")
    async with db() as session:
        organization, project = path.split("/")
        assert await token_repo.find_project(session, organization, project) is None


async def test_openapi_documents_every_answer(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]

    def refs(value: Any) -> list[str]:
        if isinstance(value, dict):
            found = [value["$ref"]] if "$ref" in value else []
            return found + [r for item in value.values() for r in refs(item)]
        if isinstance(value, list):
            return [r for item in value for r in refs(item)]
        return []

    for ref in refs(document):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref
    for path, item in document["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            assert "500" in responses, (method, path)
            if operation.get("security") or path.startswith(
                ("/api/", "/evaluations/", "/project/")
            ):
                for status in ("401", "403", "422", "503"):
                    answer = responses[status]["content"]["application/problem+json"]
                    assert answer["schema"] == {"$ref": "#/components/schemas/Problem"}, (
                        path,
                        status,
                    )
            if "requestBody" in operation:
                for status in ("413", "415"):
                    assert status in responses, (method, path, status)
            if "{" in path and path != "/api/v1/suites/{name}":
                assert "404" in responses, (method, path)
    put_scorer = document["paths"]["/api/v1/scorers/{name}/versions/{version}"]["put"]
    assert "409" in put_scorer["responses"]
    repeat = schemas["CaseIn"]["properties"]["repeat"]
    assert repeat["maximum"] == 2**53 - 1
    aggregation = schemas["CheckIn"]["properties"]["aggregation"]
    assert aggregation["discriminator"]["propertyName"] == "method"
    assert schemas["PassRateIn"]["required"] == ["method", "threshold"]


async def test_the_reports_api_still_answers_with_a_valid_token_after_the_edge(
    project: Project, client: httpx.AsyncClient
) -> None:
    token = await project.token("report.read")
    listed = await client.get("/evaluations/api/reports", headers=auth(token))
    assert listed.status_code == 200 and listed.json() == {"reports": [], "next_cursor": None}
    # A position this service did not issue (no check) is a 400, not some arbitrary page.
    cursor = f"{10**15}.{uuid.uuid4().hex}"
    assert (
        await client.get("/evaluations/api/reports", params={"cursor": cursor}, headers=auth(token))
    ).status_code == 400
