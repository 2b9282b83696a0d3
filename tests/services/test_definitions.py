"""Scorer, dataset and suite versions over the API."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import func, select

from app.digest.canonical import digest_of
from app.models import DatasetVersion, Example, ScorerVersion, SuiteVersion
from tests.conftest import Project
from tests.factories import dataset_body, define_suite, problem, suite_body


async def test_scorer_put_get_conflict_retire(project: Project, client: httpx.AsyncClient) -> None:
    headers = await project.admin()
    body = {"definition": {"kind": "judge", "rubric": "harm"}, "score_range": [0, 1]}
    first = await client.put("/api/v1/scorers/harm/versions/2", json=body, headers=headers)
    assert first.status_code == 201, first.text
    expected = digest_of({"name": "harm", "version": "2", "definition": body["definition"]})
    assert first.json()["digest"] == expected
    again = await client.put("/api/v1/scorers/harm/versions/2", json=body, headers=headers)
    assert again.status_code == 200 and again.json()["digest"] == expected
    changed = {**body, "score_range": [0, 2]}
    problem(await client.put("/api/v1/scorers/harm/versions/2", json=changed, headers=headers), 409)
    read = await client.get("/api/v1/scorers/harm/versions/2", headers=headers)
    assert read.json()["score_range"] == [0.0, 1.0] and read.json()["retired"] is False
    retired = await client.delete("/api/v1/scorers/harm/versions/2", headers=headers)
    assert retired.status_code == 200 and retired.json()["retired"] is True
    problem(await client.get("/api/v1/scorers/harm/versions/3", headers=headers), 404)


@pytest.mark.parametrize(
    ("content", "status", "loc"),
    [
        (b'{"definition": "x"}', 422, ["body", "definition"]),
        (b'{"score_range": null}', 422, ["body", "definition"]),
        (b'{"definition": {}, "score_range": [1, 0]}', 422, ["body"]),
        (b'{"definition": {}, "score_range": ["0", 1]}', 422, ["body", "score_range", 0]),
        (b'{"definition": {"x": NaN}}', 422, ["body", "definition", "x"]),
        (b'{"definition": {"x": 1, "x": 2}}', 422, ["body", "definition", "x"]),
        (b'{"definition": {}, "extra": 1}', 422, ["body", "extra"]),
        (b"[]", 422, ["body"]),
        (b"", 422, ["body"]),
    ],
)
async def test_scorer_bad_input(
    project: Project, client: httpx.AsyncClient, db, content: bytes, status: int, loc: list[object]
) -> None:
    headers = {**(await project.admin()), "Content-Type": "application/json"}
    response = await client.put("/api/v1/scorers/s/versions/1", content=content, headers=headers)
    body = problem(response, status)
    assert body["errors"][0]["loc"][: len(loc)] == loc
    async with db() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(ScorerVersion)
            .where(ScorerVersion.project_id == project.id)
        )
    assert count == 0


async def test_oversize_and_wrong_media_type(project: Project, client: httpx.AsyncClient) -> None:
    headers = {**(await project.admin()), "Content-Type": "application/json"}
    big = b'{"definition": {"x": "' + b"a" * (3 * 1024 * 1024) + b'"}}'
    problem(await client.put("/api/v1/scorers/s/versions/1", content=big, headers=headers), 413)
    problem(
        await client.put(
            "/api/v1/scorers/s/versions/1",
            content=b"definition=x",
            headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
        ),
        415,
    )
    problem(await client.put("/api/v1/scorers/bad!name/versions/1", json={}, headers=headers), 422)


async def test_dataset_json_ndjson_and_digest(
    project: Project, client: httpx.AsyncClient, db
) -> None:
    headers = await project.admin()
    body = dataset_body(4)
    created = await client.put("/api/v1/datasets/qa/versions/1", json=body, headers=headers)
    assert created.status_code == 201, created.text
    examples = sorted(
        (
            {"id": e["id"], "body_digest": digest_of(e["body"]), "tags": e["tags"]}
            for e in body["examples"]
        ),
        key=lambda e: e["id"],
    )
    assert created.json()["digest"] == digest_of(
        {"name": "qa", "version": "1", "examples": examples}
    )
    ndjson = b"\n".join(__import__("orjson").dumps(e) for e in reversed(body["examples"])) + b"\n"
    same = await client.put(
        "/api/v1/datasets/qa/versions/1",
        content=ndjson,
        headers={**headers, "Content-Type": "application/x-ndjson"},
    )
    assert same.status_code == 200 and same.json()["digest"] == created.json()["digest"]
    read = await client.get("/api/v1/datasets/qa/versions/1", headers=headers)
    assert next(e["body"] for e in read.json()["examples"]) == {"q": "question 0"}
    reader = {"Authorization": f"Bearer {await project.token('report.read')}"}
    redacted = await client.get("/api/v1/datasets/qa/versions/1", headers=reader)
    assert all("body" not in e for e in redacted.json()["examples"])
    changed = dataset_body(4)
    changed["examples"][0]["body"] = {"q": "other"}
    problem(await client.put("/api/v1/datasets/qa/versions/1", json=changed, headers=headers), 409)


async def test_dataset_bad_input_stores_nothing(
    project: Project, client: httpx.AsyncClient, db
) -> None:
    headers = await project.admin()
    duplicate = {"examples": [{"id": "a", "body": 1}, {"id": "a", "body": 2}]}
    body = problem(
        await client.put("/api/v1/datasets/d/versions/1", json=duplicate, headers=headers), 422
    )
    assert body["index"] == 1
    problem(
        await client.put("/api/v1/datasets/d/versions/1", json={"examples": []}, headers=headers),
        422,
    )
    problem(
        await client.put(
            "/api/v1/datasets/d/versions/1",
            json={"examples": [{"id": "a/b", "body": 1}]},
            headers=headers,
        ),
        422,
    )
    bad_line = await client.put(
        "/api/v1/datasets/d/versions/1",
        content=b'{"id": "a", "body": 1}\n{"id": "b", "body": NaN}\n',
        headers={**headers, "Content-Type": "application/x-ndjson"},
    )
    assert problem(bad_line, 422)["errors"][0]["loc"][0] == "line 2"
    async with db() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(DatasetVersion)
            .where(DatasetVersion.project_id == project.id)
        )
        examples = await session.scalar(select(func.count()).select_from(Example))
    assert count == 0
    assert examples is not None


async def test_suite_freezes_resolves_and_activates(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    first = await define_suite(client, headers)
    content = first["content"]
    assert first["status"] == "active"
    assert first["digest"] == digest_of(content)
    check = content["checks"][0]
    assert check["scorer"]["digest"].startswith("sha256:")
    assert check["dataset"]["digest"].startswith("sha256:")
    assert check["repeats"] == 1 and check["min_coverage"] == 1.0 and check["min_samples"] == 1
    assert content["checks"][1]["aggregation"] == {"method": "all_pass"}
    assert content["decision_rule"]["family"] == []
    again = await client.put("/api/v1/suites/rag/versions/1", json=suite_body(), headers=headers)
    assert again.status_code == 200 and again.json()["digest"] == first["digest"]
    problem(
        await client.put(
            "/api/v1/suites/rag/versions/1", json=suite_body(correction="holm"), headers=headers
        ),
        409,
    )
    second = await client.put(
        "/api/v1/suites/rag/versions/2",
        json=suite_body(rule="non_inferiority", correction="holm"),
        headers=headers,
    )
    assert second.status_code == 201 and second.json()["status"] == "inactive"
    assert second.json()["content"]["decision_rule"]["family"] == ["accuracy", "accuracy/german"]
    activated = await client.post("/api/v1/suites/rag/versions/2/activate", headers=headers)
    assert activated.json() == {"name": "rag", "version": "2", "superseded_report_ids": []}
    suite = (await client.get("/api/v1/suites/rag", headers=headers)).json()
    assert suite["active_version"] == "2"
    assert [v["status"] for v in suite["versions"]] == ["inactive", "active"]
    problem(await client.post("/api/v1/suites/rag/versions/9/activate", headers=headers), 404)


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (
            lambda b: b["checks"][0].update(scorer={"name": "nope", "version": "1"}),
            ["body", "checks", 0, "scorer"],
        ),
        (
            lambda b: b["checks"][0].update(dataset={"name": "qa", "version": "9"}),
            ["body", "checks", 0, "dataset"],
        ),
        (lambda b: b["checks"].append(dict(b["checks"][1])), ["body", "checks", 3, "check_id"]),
        (
            lambda b: b["checks"][0]["slices"][0].update(tag="lang:fr"),
            ["body", "checks", 0, "slices", 0, "tag"],
        ),
        (lambda b: b["checks"][0].update(min_samples=13), ["body", "checks", 0, "min_samples"]),
        (
            lambda b: b["checks"][0]["aggregation"].update(threshold=1.5),
            ["body", "checks", 0, "aggregation"],
        ),
        (
            lambda b: b["checks"][1]["aggregation"].update(threshold=0.5),
            ["body", "checks", 1, "aggregation"],
        ),
        (lambda b: b["checks"][0].update(repeats=0), ["body", "checks", 0, "repeats"]),
        (lambda b: b.update(validity_hours=0), ["body", "validity_hours"]),
        (lambda b: b["decision_rule"].update(alpha=0.7), ["body", "decision_rule", "alpha"]),
        (lambda b: b["decision_rule"].update(family=["x"]), ["body", "decision_rule", "family"]),
        (lambda b: b.pop("checks"), ["body", "checks"]),
        (
            lambda b: b["checks"][0]["slices"].append(dict(b["checks"][0]["slices"][0])),
            ["body", "checks", 0, "slices", 1, "name"],
        ),
    ],
)
async def test_suite_refusals(project: Project, client: httpx.AsyncClient, db, mutate, loc) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    body = suite_body()
    mutate(body)
    response = await client.put("/api/v1/suites/other/versions/1", json=body, headers=headers)
    assert problem(response, 422)["errors"][0]["loc"][: len(loc)] == loc
    async with db() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(SuiteVersion)
            .where(SuiteVersion.project_id == project.id)
        )
    assert count == 1
