"""Starting evaluations: idempotency, references, status counts."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from sqlalchemy import func, select, update

from app.models import Evaluation
from tests.conftest import Project
from tests.factories import define_suite, problem, start_evaluation, suite_body

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

START = {
    "subject": {"digest": "sha1:0123456789abcdef0123456789abcdef01234567", "branch": "main"},
    "suite": {"name": "rag"},
    "mode": "gate",
    "execution_mode": "external",
}


async def count_evaluations(db, project: Project) -> int:
    async with db() as session:
        value = await session.scalar(
            select(func.count()).select_from(Evaluation).where(Evaluation.project_id == project.id)
        )
    return int(value or 0)


async def test_start_and_status(project: Project, client: httpx.AsyncClient) -> None:
    headers = await project.admin()
    suite = await define_suite(client, headers)
    started = await start_evaluation(client, headers)
    assert started["status"] == "running"
    assert started["suite_ref"] == {
        "id": started["suite_ref"]["id"],
        "name": "rag",
        "version": "1",
        "digest": suite["digest"],
    }
    status = await client.get(f"/api/v1/evaluations/{started['evaluation_id']}", headers=headers)
    assert status.status_code == 200
    body = status.json()
    assert body["subject"]["repo"] == "acme/web"
    assert [c["check_id"] for c in body["checks"]] == ["accuracy", "no_harm", "helpfulness"]
    assert [c["expected"] for c in body["checks"]] == [12, 12, 24]
    problem(
        await client.get(
            "/api/v1/evaluations/00000000-0000-4000-8000-000000000000", headers=headers
        ),
        404,
    )
    problem(await client.get("/api/v1/evaluations/not-a-uuid", headers=headers), 422)


async def test_idempotent_start_under_concurrent_retries(
    project: Project, client: httpx.AsyncClient, db
) -> None:
    headers = {**(await project.admin()), "Idempotency-Key": "retry-1"}
    await define_suite(client, headers)
    responses = await asyncio.gather(
        *(client.post("/api/v1/evaluations", json=START, headers=headers) for _ in range(10))
    )
    assert {r.status_code for r in responses} == {201}
    assert len({r.json()["evaluation_id"] for r in responses}) == 1
    assert await count_evaluations(db, project) == 1
    other = {**START, "mode": "experiment"}
    body = problem(await client.post("/api/v1/evaluations", json=other, headers=headers), 422)
    assert body["errors"][0]["loc"] == ["header", "Idempotency-Key"]
    assert await count_evaluations(db, project) == 1


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"suite": {"name": "missing"}}, ["body", "suite", "name"]),
        ({"suite": {"name": "rag", "version": "7"}}, ["body", "suite", "version"]),
        ({"subject": {"repo": "x"}}, ["body", "subject"]),
        ({"subject": {"digest": "SHA1:ABC"}}, ["body", "subject"]),
        ({"subject": {"digest": "sha1:0123456789", "n": 2**60}}, ["body", "subject", "n"]),
        ({"mode": "production"}, ["body", "mode"]),
        ({"execution_mode": 3}, ["body", "execution_mode"]),
        (
            {"baseline_evaluation_id": "00000000-0000-4000-8000-000000000000"},
            ["body", "baseline_evaluation_id"],
        ),
        ({"baseline_evaluation_id": "nope"}, ["body", "baseline_evaluation_id"]),
        ({"extra": True}, ["body", "extra"]),
    ],
)
async def test_start_refusals(project: Project, client: httpx.AsyncClient, db, change, loc) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    body = problem(
        await client.post("/api/v1/evaluations", json={**START, **change}, headers=headers), 422
    )
    assert body["errors"][0]["loc"][: len(loc)] == loc
    assert await count_evaluations(db, project) == 0


async def test_comparative_rules_need_a_finished_baseline(
    project: Project, client: httpx.AsyncClient, db
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    threshold_run = await start_evaluation(client, headers)
    with_baseline = {**START, "baseline_evaluation_id": threshold_run["evaluation_id"]}
    assert (
        "no baseline"
        in problem(
            await client.post("/api/v1/evaluations", json=with_baseline, headers=headers), 422
        )["detail"]
    )
    await client.put(
        "/api/v1/suites/rag/versions/2",
        json=suite_body(rule="non_inferiority", correction="holm"),
        headers=headers,
    )
    await client.post("/api/v1/suites/rag/versions/2/activate", headers=headers)
    assert (
        "needs a baseline"
        in problem(await client.post("/api/v1/evaluations", json=START, headers=headers), 422)[
            "detail"
        ]
    )
    assert (
        "another suite version"
        in problem(
            await client.post("/api/v1/evaluations", json=with_baseline, headers=headers), 422
        )["detail"]
    )
    baseline = await start_evaluation(client, headers, mode="experiment")
    comparative = {**START, "baseline_evaluation_id": baseline["evaluation_id"]}
    assert (
        "not finished"
        in problem(
            await client.post("/api/v1/evaluations", json=comparative, headers=headers), 422
        )["detail"]
    )
    async with db() as session, session.begin():
        await session.execute(
            update(Evaluation)
            .where(Evaluation.id == uuid.UUID(baseline["evaluation_id"]))
            .values(status="finished")
        )
    started = await client.post("/api/v1/evaluations", json=comparative, headers=headers)
    assert started.status_code == 201, started.text
    status = await client.get(
        f"/api/v1/evaluations/{started.json()['evaluation_id']}", headers=headers
    )
    assert status.json()["baseline_evaluation_id"] == baseline["evaluation_id"]
