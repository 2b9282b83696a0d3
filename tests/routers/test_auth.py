"""The authorization matrix: no token, bad token, missing permission, peer, other project."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Project, auth
from tests.factories import case, define_suite, problem, start_evaluation

READ_PATHS = [
    "/api/v1/scorers/exact-match/versions/1",
    "/api/v1/datasets/qa/versions/1",
    "/api/v1/suites/rag/versions/1",
    "/api/v1/suites/rag",
]


@pytest.mark.parametrize("path", READ_PATHS)
async def test_reads_need_a_token_and_report_read(
    project: Project, other_project: Project, client: httpx.AsyncClient, path: str
) -> None:
    await define_suite(client, await project.admin())
    response = await client.get(path)
    problem(response, 401)
    assert response.headers["www-authenticate"] == "Bearer"
    problem(await client.get(path, headers=auth("evb_not-a-token")), 401)
    problem(await client.get(path, headers={"Authorization": "Basic abc"}), 401)
    problem(await client.get(path, headers=auth(await project.token("evaluation.write"))), 403)
    problem(await client.get(path, headers=auth(await project.token(kind="peer"))), 403)
    assert (
        await client.get(path, headers=auth(await project.token("report.read")))
    ).status_code == 200
    problem(await client.get(path, headers=await other_project.admin()), 404)


@pytest.mark.parametrize(
    ("method", "path", "permission"),
    [
        ("PUT", "/api/v1/scorers/s/versions/1", "scorer.write"),
        ("DELETE", "/api/v1/scorers/exact-match/versions/1", "scorer.write"),
        ("PUT", "/api/v1/datasets/d/versions/1", "dataset.write"),
        ("PUT", "/api/v1/suites/s/versions/1", "suite.write"),
        ("POST", "/api/v1/suites/rag/versions/1/activate", "suite.write"),
        ("POST", "/api/v1/evaluations", "evaluation.write"),
        ("POST", "/api/v1/tokens", "admin"),
    ],
)
async def test_writes_need_their_permission(
    project: Project, client: httpx.AsyncClient, method: str, path: str, permission: str
) -> None:
    await define_suite(client, await project.admin())
    problem(await client.request(method, path, json={}), 401)
    reader = auth(await project.token("report.read"))
    body = problem(await client.request(method, path, json={}, headers=reader), 403)
    assert permission in body["detail"]


async def test_cases_are_refused_across_projects_and_without_permission(
    project: Project, other_project: Project, client: httpx.AsyncClient, db
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases"
    batch = {"cases": [case("accuracy", "e00")]}
    problem(await client.post(url, json=batch, headers=await other_project.admin()), 404)
    problem(
        await client.get(
            f"/api/v1/evaluations/{evaluation['evaluation_id']}",
            headers=await other_project.admin(),
        ),
        404,
    )
    problem(
        await client.post(url, json=batch, headers=auth(await project.token("report.read"))), 403
    )
    status = await client.get(f"/api/v1/evaluations/{evaluation['evaluation_id']}", headers=headers)
    assert status.json()["received_cases"] == 0


async def test_assurance_caps(project: Project, client: httpx.AsyncClient, db) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases"
    ci = auth(
        await project.token("evaluation.write", "report.read", kind="runner", assurance="reported")
    )
    refused = await client.post(
        url,
        json={
            "cases": [
                case("accuracy", "e00"),
                case("accuracy", "e01", assurance="platform_verified"),
            ]
        },
        headers=ci,
    )
    assert problem(refused, 403)["index"] == 1
    user = auth(await project.token("evaluation.write", "report.read"))
    refused = await client.post(
        url,
        json={"cases": [case("accuracy", "e02", assurance="independently_observed")]},
        headers=user,
    )
    problem(refused, 403)
    ok = await client.post(
        url,
        json={
            "cases": [
                case("accuracy", "e00", assurance="development_unisolated"),
                case("accuracy", "e01"),
            ]
        },
        headers=ci,
    )
    assert ok.json() == {"accepted": 2, "unchanged": 0}
    async with db() as session:
        from sqlalchemy import text

        rows = (
            await session.execute(
                text(
                    "SELECT example_id, assurance FROM cases WHERE evaluation_id = :id ORDER BY example_id"
                ),
                {"id": evaluation["evaluation_id"]},
            )
        ).all()
    assert rows == [("e00", "development_unisolated"), ("e01", "reported")]
    local = await start_evaluation(client, headers, execution_mode="local")
    runner = await project.admin()
    refused = await client.post(
        f"/api/v1/evaluations/{local['evaluation_id']}/cases",
        json={"cases": [case("accuracy", "e00", assurance="reported")]},
        headers=runner,
    )
    problem(refused, 403)


async def test_admin_creates_tokens(project: Project, client: httpx.AsyncClient) -> None:
    headers = await project.admin()
    created = await client.post(
        "/api/v1/tokens", json={"name": "reader", "permissions": ["report.read"]}, headers=headers
    )
    assert created.status_code == 201, created.text
    token = created.json()["token"]
    assert token.startswith("evb_") and len(token) > 40
    assert created.json()["assurance"] == "reported"
    assert (await client.get("/api/v1/suites/none", headers=auth(token))).status_code == 404
    problem(
        await client.post(
            "/api/v1/tokens", json={"name": "x", "permissions": ["root"]}, headers=headers
        ),
        422,
    )
    problem(
        await client.post(
            "/api/v1/tokens", json={"name": "x", "permissions": [], "kind": "god"}, headers=headers
        ),
        422,
    )


async def test_concurrent_misses_share_one_lookup(project, app) -> None:
    """When a cached token expires under load, one lookup runs for all waiting requests."""
    import asyncio

    from app.identity.auth import PrincipalCache, principal_for

    secret = await project.token("report.read")
    real_pool = app.state.resources.reader_pool
    acquired = 0

    class CountingPool:
        def acquire(self):
            nonlocal acquired
            acquired += 1
            return real_pool.acquire()

    cache = PrincipalCache(60)
    principals = await asyncio.gather(
        *(principal_for(secret, cache, CountingPool()) for _ in range(20))
    )
    assert acquired == 1
    assert {p.project_id for p in principals} == {project.id}
    assert await principal_for("evb_unknown", cache, CountingPool()) is None
