"""Closing an incident through the API: an admin token of the incident's project only, with a
reason, audited (the token and the reason are kept, append-only); every bad request is refused
and changes nothing."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from app.platform.config import to_plain_url
from tests.conftest import Project, auth
from tests.factories import first_report

pytestmark = pytest.mark.server


async def opened(database_url: str, project: Project, report_id: str) -> int:
    """An incident of the report, opened as the service opens one."""
    connection = await asyncpg.connect(to_plain_url(database_url))
    try:
        value: int = await connection.fetchval(
            "INSERT INTO incidents (project_id, report_id, kind, stored_digest, computed_digest,"
            " detail) VALUES ($1, $2, 'digest_mismatch', 'a', 'b', 'test') RETURNING id",
            project.id,
            uuid.UUID(report_id),
        )
        return value
    finally:
        await connection.close()


async def open_ids(client: httpx.AsyncClient, headers: dict[str, str]) -> list[int]:
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    return [i["incident_id"] for i in health["open_incidents"]]


async def test_an_admin_closes_an_incident_of_its_project_with_a_reason(
    project: Project, other_project: Project, client: httpx.AsyncClient, database_url: str
) -> None:
    headers, report = await first_report(project, client)
    incident = await opened(database_url, project, report["report_id"])
    path = f"/evaluations/api/incidents/{incident}/resolve"
    reader = auth(await project.token("report.read"))
    refusals: list[tuple[dict[str, str], Any, int]] = [
        (reader, {"reason": "x"}, 403),
        (await other_project.admin(), {"reason": "x"}, 404),
        ({}, {"reason": "x"}, 401),
        (headers, {}, 422),
        (headers, {"reason": ""}, 422),
        (headers, {"reason": 7}, 422),
        (headers, {"reason": "x" * 2001}, 422),
        (headers, {"reason": "x", "extra": 1}, 422),
        (headers, [], 422),
    ]
    for who, body, status in refusals:
        answer = await client.post(path, json=body, headers=who)
        assert answer.status_code == status, (body, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
    for raw in (b'{"reason": "a", "reason": "b"}', b'{"reason": NaN}'):
        answer = await client.post(
            path, content=raw, headers={**headers, "content-type": "application/json"}
        )
        assert answer.status_code in (400, 422), answer.text
    for bad in ("/evaluations/api/incidents/x/resolve", "/evaluations/api/incidents/0/resolve"):
        assert (await client.post(bad, json={"reason": "x"}, headers=headers)).status_code == 422
    unknown = await client.post(
        "/evaluations/api/incidents/999999999/resolve", json={"reason": "x"}, headers=headers
    )
    assert unknown.status_code == 404
    assert incident in await open_ids(client, headers)  # nothing refused changed anything

    answer = await client.post(path, json={"reason": "restored from backup"}, headers=headers)
    assert answer.status_code == 200, answer.text
    closed = answer.json()
    assert closed["incident_id"] == incident and closed["reason"] == "restored from backup"
    assert closed["actor"].startswith("token ")
    assert incident not in await open_ids(client, headers)
    again = await client.post(path, json={"reason": "twice"}, headers=headers)
    assert again.status_code == 404
    connection = await asyncpg.connect(to_plain_url(database_url))
    try:
        kept = await connection.fetchrow(
            "SELECT actor, reason FROM incident_resolutions WHERE incident_id = $1", incident
        )
    finally:
        await connection.close()
    assert (kept["actor"], kept["reason"]) == (closed["actor"], "restored from backup")
