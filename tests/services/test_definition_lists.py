"""Listing what a project has defined: scorers, datasets, suites, newest first, in pages."""

from __future__ import annotations

import httpx

from tests.conftest import Project, auth
from tests.factories import define_suite, problem


async def _pages(client: httpx.AsyncClient, path: str, key: str, headers, **params) -> list:
    seen, cursor = [], None
    while True:
        query = {**params, "limit": 2, **({"cursor": cursor} if cursor else {})}
        answer = await client.get(path, params=query, headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert len(body[key]) <= 2
        seen += body[key]
        cursor = body["next_cursor"]
        if cursor is None:
            return seen


async def test_lists_newest_first_in_pages_within_the_project(
    project: Project, other_project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    await define_suite(client, headers, suite="second")
    await define_suite(client, await other_project.admin(), suite="elsewhere")
    reader = auth(await project.token("report.read"))

    scorers = await _pages(client, "/api/v1/scorers", "scorers", reader)
    assert [(s["name"], s["version"]) for s in scorers] == [
        ("helpful-judge", "1"),
        ("harm-judge", "2"),
        ("exact-match", "1"),
    ]
    one = await _pages(client, "/api/v1/scorers", "scorers", reader, name="harm-judge")
    assert [s["version"] for s in one] == ["2"]
    datasets = await _pages(client, "/api/v1/datasets", "datasets", reader)
    assert [(d["name"], d["example_count"]) for d in datasets] == [("qa", 12)]
    assert "examples" not in datasets[0]
    suites = await _pages(client, "/api/v1/suites", "suites", reader)
    assert [(s["name"], s["active_version"]) for s in suites] == [("second", "1"), ("rag", "1")]


async def test_list_refusals(project: Project, client: httpx.AsyncClient) -> None:
    writer = auth(await project.token("scorer.write"))
    for path in ("/api/v1/scorers", "/api/v1/datasets", "/api/v1/suites"):
        problem(await client.get(path), 401)
        problem(await client.get(path, headers=writer), 403)
    reader = auth(await project.token("report.read"))
    problem(await client.get("/api/v1/scorers", params={"limit": 201}, headers=reader), 422)
    problem(await client.get("/api/v1/scorers", params={"cursor": "x"}, headers=reader), 400)
    problem(await client.get("/api/v1/datasets", params={"name": "a\x00"}, headers=reader), 422)
