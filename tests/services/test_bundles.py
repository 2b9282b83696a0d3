"""Exporting, storing, listing, downloading and verifying reproducibility bundles."""

from __future__ import annotations

import base64
import hashlib
import uuid
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import text

from tests.bundle_helpers import (
    download,
    export,
    lines_of,
    node_verify,
    python_verify,
    rich_report,
)
from tests.conftest import Project, auth
from tests.factories import problem

BUNDLES = "/evaluations/api/reports/bundles"


async def bundle_rows(db: Any, report_id: str) -> int:
    """How many bundle records a report has."""
    async with db() as session:
        return int(
            (
                await session.execute(
                    text("SELECT count(*) FROM bundles WHERE report_id = :id"), {"id": report_id}
                )
            ).scalar_one()
        )


async def stored_keys(app: FastAPI, prefix: str) -> list[str]:
    """Objects under a prefix, read from the S3 endpoint itself."""
    store = app.state.resources.object_store
    answer = await store.client.list_objects_v2(Bucket=store.bucket, Prefix=prefix)
    return [item["Key"] for item in answer.get("Contents", [])]


async def test_a_rich_report_bundle_verifies_with_both_verifiers(
    project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any, tmp_path: Path
) -> None:
    headers = await project.admin()
    report = await rich_report(client, headers, db, app.state.resources.object_store)
    record = await export(client, headers, report["report_id"])
    assert record["report_id"] == report["report_id"]
    assert record["media_type"] == "application/vnd.evalbook.bundle.v1+jsonl.gzip"
    assert record["object_key"] == (
        f"bundles/{project.path}/{report['report_id']}/{record['bundle_id']}.jsonl.gz"
    )
    response = await client.get(f"{BUNDLES}/{record['bundle_id']}/content", headers=headers)
    assert response.status_code == 200
    data = response.content
    assert len(data) == record["size_bytes"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == record["digest"]
    assert response.headers["repr-digest"] == (
        "sha-256=:" + base64.b64encode(hashlib.sha256(data).digest()).decode() + ":"
    )
    path = tmp_path / "rich.jsonl.gz"
    path.write_bytes(data)
    lines = lines_of(path)
    kinds = [line["kind"] for line in lines]
    assert kinds[:3] == ["header", "report", "suite_version"]
    assert kinds[-3:] == ["unavailable", "redacted", "trailer"]
    assert kinds.count("check") == 3 and "baseline_case" in kinds
    unavailable = {(i["what"], i["reason"]) for i in lines[-3]["items"]}
    assert unavailable == {
        ("example_body", "retention"),
        ("case_output", "retention"),
        ("case_output", "stored_at_sso"),
    }
    assert record["unavailable_count"] == len(lines[-3]["items"]) == 6, lines[-3]["items"]
    assert record["redacted_count"] == len(lines[-2]["items"])
    assert any(line.get("manifest") for line in lines if line["kind"] == "check")
    code, outcome = python_verify(path, "--replay")
    assert code == 0, outcome
    assert outcome["replay"].startswith("matched")
    node_code, node_outcome = node_verify(path)
    assert node_code == 0, node_outcome
    assert {k: v for k, v in outcome["proven"].items() if k != "replay"} == node_outcome["proven"]

    listed = await client.get(BUNDLES, params={"report_id": report["report_id"]}, headers=headers)
    assert listed.status_code == 200
    assert [b["bundle_id"] for b in listed.json()["bundles"]] == [record["bundle_id"]]
    one = await client.get(f"{BUNDLES}/{record['bundle_id']}", headers=headers)
    assert one.json() == record


async def test_without_read_body_no_body_or_output_appears_anywhere(
    project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any, tmp_path: Path
) -> None:
    admin = await project.admin()
    report = await rich_report(client, admin, db, app.state.resources.object_store)
    exporter = auth(await project.token("report.read", "report.export"))
    record = await export(client, exporter, report["report_id"])
    path = await download(client, exporter, record["bundle_id"], tmp_path / "redacted.jsonl.gz")
    lines = lines_of(path)
    assert not any("body" in line for line in lines if line["kind"] == "example")
    assert not any("output" in line for line in lines if line["kind"] in ("case", "baseline_case"))
    assert b"question " not in path.read_bytes() and b"question " not in __import__(
        "gzip"
    ).decompress(path.read_bytes())
    redacted = {(i["what"], i["reason"]) for i in lines[-2]["items"]}
    assert ("example_bodies", "permission") in redacted
    assert ("case_outputs", "permission") in redacted
    assert ("trace_bodies", "trace_capture_policy") in redacted
    assert python_verify(path)[0] == 0
    assert node_verify(path)[0] == 0

    full = await export(client, admin, report["report_id"])
    refused = await client.get(f"{BUNDLES}/{full['bundle_id']}/content", headers=exporter)
    assert "dataset.read_body" in problem(refused, 403)["detail"]
    allowed = await client.get(f"{BUNDLES}/{full['bundle_id']}/content", headers=admin)
    assert allowed.status_code == 200


async def test_bad_bundle_requests_are_refused_and_leave_nothing(
    project: Project,
    other_project: Project,
    client: httpx.AsyncClient,
    app: FastAPI,
    db: Any,
    settings: Any,
) -> None:
    headers = await project.admin()
    report = await rich_report(client, headers, db, app.state.resources.object_store)
    report_id = report["report_id"]
    post = "/evaluations/api/reports/bundle"
    json_headers = {**headers, "Content-Type": "application/json"}
    for content, status in (
        (b'{"report_id": 5}', 422),
        (b"{}", 422),
        (b'{"report_id": "not-a-uuid"}', 422),
        (b'{"report_id": "' + report_id.encode() + b'", "extra": 1}', 422),
        (b'{"report_id": "' + report_id.encode() + b'", "report_id": "x"}', 422),
        (b'{"report_id": NaN}', 422),
        (b'{"report_id": 1e400}', 422),
        (b"[1, 2", 422),
        (b'{"report_id": "' + b"x" * (settings.max_json_body_bytes + 1) + b'"}', 413),
    ):
        problem(await client.post(post, content=content, headers=json_headers), status)
    problem(await client.post(post, json={"report_id": str(uuid.uuid4())}, headers=headers), 404)
    other = await other_project.admin()
    problem(await client.post(post, json={"report_id": report_id}, headers=other), 404)
    reader = auth(await project.token("report.read", "dataset.read_body"))
    problem(await client.post(post, json={"report_id": report_id}, headers=reader), 403)
    problem(await client.post(post, json={"report_id": report_id}), 401)
    assert await bundle_rows(db, report_id) == 0
    assert await stored_keys(app, f"bundles/{project.path}/") == []

    record = await export(client, headers, report_id)
    for path in (f"{BUNDLES}/{record['bundle_id']}", f"{BUNDLES}/{record['bundle_id']}/content"):
        problem(await client.get(path, headers=other), 404)
        problem(await client.get(path, headers=reader), 403)
    for path in (f"{BUNDLES}/{uuid.uuid4()}", f"{BUNDLES}/{uuid.uuid4()}/content"):
        problem(await client.get(path, headers=headers), 404)
    problem(await client.get(f"{BUNDLES}/nope", headers=headers), 422)
    problem(await client.get(BUNDLES, params={"cursor": "@@"}, headers=headers), 400)
    problem(await client.get(BUNDLES, params={"limit": 0}, headers=headers), 422)
    problem(await client.get(BUNDLES, params={"report_id": "x"}, headers=headers), 422)
    assert (await client.get(BUNDLES, headers=other)).json()["bundles"] == []


async def test_listing_pages_newest_first(
    project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any
) -> None:
    headers = await project.admin()
    report = await rich_report(client, headers, db, app.state.resources.object_store)
    made = [(await export(client, headers, report["report_id"]))["bundle_id"] for _ in range(3)]
    first = (await client.get(BUNDLES, params={"limit": 2}, headers=headers)).json()
    second = (
        await client.get(
            BUNDLES, params={"limit": 2, "cursor": first["next_cursor"]}, headers=headers
        )
    ).json()
    assert [b["bundle_id"] for b in first["bundles"] + second["bundles"]] == made[::-1]
    assert second["next_cursor"] is None


async def test_a_case_limit_leaves_one_item_per_check(
    project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any, tmp_path: Path
) -> None:
    headers = await project.admin()
    report = await rich_report(client, headers, db, app.state.resources.object_store)
    app.state.resources.settings.bundle_case_limit = 20
    try:
        record = await export(client, headers, report["report_id"])
    finally:
        app.state.resources.settings.bundle_case_limit = 20_000
    path = await download(client, headers, record["bundle_id"], tmp_path / "limited.jsonl.gz")
    lines = lines_of(path)
    assert sum(line["kind"] == "case" for line in lines) == 20
    assert sum(line["kind"] == "baseline_case" for line in lines) == 20
    limits = [i for i in lines[-3]["items"] if i["reason"] == "case_limit"]
    by_check = {(i["ref"]["kind"], i["ref"]["check_id"]): i for i in limits}
    # accuracy keeps its 12 cases; no_harm keeps 8 of 12; helpfulness keeps none of 24.
    assert by_check[("case", "no_harm")]["count"] == 4
    assert by_check[("case", "no_harm")]["first"] == {"example_id": "e08", "repeat": 0}
    assert by_check[("case", "no_harm")]["last"] == {"example_id": "e11", "repeat": 0}
    assert by_check[("case", "helpfulness")]["count"] == 24
    assert ("case", "accuracy") not in by_check
    assert by_check[("baseline_case", "helpfulness")]["count"] == 16
    code, outcome = python_verify(path, "--replay")
    assert code == 0 and outcome["replay"].startswith("not run")
    assert node_verify(path)[0] == 0


async def test_retired_and_altered_scorers_are_unavailable(
    project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any, tmp_path: Path
) -> None:
    headers = await project.admin()
    report = await rich_report(client, headers, db, app.state.resources.object_store)
    retired = await client.delete("/api/v1/scorers/exact-match/versions/1", headers=headers)
    assert retired.status_code == 200, retired.text
    async with db() as session, session.begin():
        # Behind the triggers, as a superuser could: a scorer version is frozen once written.
        await session.execute(text("SET LOCAL session_replication_role = replica"))
        await session.execute(
            text(
                'UPDATE scorer_versions SET definition = \'{"kind":"lenient"}\''
                " WHERE project_id = :project AND name = 'harm-judge'"
            ),
            {"project": project.id},
        )
    record = await export(client, headers, report["report_id"])
    path = await download(client, headers, record["bundle_id"], tmp_path / "scorers.jsonl.gz")
    lines = lines_of(path)
    assert [(line["name"]) for line in lines if line["kind"] == "scorer_version"] == [
        "helpful-judge"
    ]
    items = {
        (i["ref"]["name"], i["reason"]) for i in lines[-3]["items"] if i["what"] == "scorer_version"
    }
    assert items == {
        ("exact-match", "scorer_missing"),
        ("harm-judge", "scorer_digest_mismatch"),
    }
    code, outcome = python_verify(path, "--replay")
    assert code == 0, outcome
    assert outcome["not_proven"]["unavailable: scorer_version (scorer_missing)"] == 1
    assert node_verify(path)[0] == 0
