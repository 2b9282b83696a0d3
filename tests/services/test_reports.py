"""Issuing, serving and verifying reports."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import httpx
import orjson
import rfc8785

from app.digest.manifest_digests import document_of
from tests.conftest import Project
from tests.factories import case, define_suite, problem, start_evaluation


async def full_run(
    client: httpx.AsyncClient, headers: dict[str, str], **start: Any
) -> dict[str, Any]:
    evaluation = await start_evaluation(client, headers, **start)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    cases = [
        case("accuracy", f"e{i:02d}", status="pass" if i % 5 else "fail", output={"a": i})
        for i in range(12)
    ]
    cases += [case("no_harm", f"e{i:02d}", output={"v": "ok"}) for i in range(12)]
    cases += [
        case("helpfulness", f"e{i:02d}", r, score=0.5 + i / 40, output={"t": i})
        for i in range(12)
        for r in range(2)
    ]
    response = await client.post(url + "/cases", json={"cases": cases}, headers=headers)
    assert response.status_code == 200, response.text
    return evaluation


async def test_finish_issues_one_verifiable_report(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await full_run(client, headers)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    first = await client.post(url + "/finish", headers=headers)
    assert first.status_code == 201, first.text
    report = first.json()
    body = report["body"]
    assert body["schema_version"] == "1.0" and body["producer"] == "svc_evalbook"
    assert body["result"] == "pass", body["reasons"]
    assert report["digest"] == "sha256:" + hashlib.sha256(rfc8785.dumps(body)).hexdigest()
    assert report["envelope"]["status"] == "current"
    assert report["envelope"]["url"] == f"https://evalbook.test/reports/{report['report_id']}"
    again = await client.post(url + "/finish", headers=headers)
    assert again.status_code == 200 and again.json()["digest"] == report["digest"]
    raw = await client.get(f"/evaluations/api/reports/{report['report_id']}/body", headers=headers)
    assert raw.content == rfc8785.dumps(body)
    assert (
        raw.headers["repr-digest"]
        == "sha-256=:" + base64.b64encode(hashlib.sha256(raw.content).digest()).decode() + ":"
    )
    assert (await client.get(url + "/report", headers=headers)).json()["report_id"] == report[
        "report_id"
    ]
    verified = await client.post(
        "/evaluations/api/reports/verify", json={"report_id": report["report_id"]}, headers=headers
    )
    assert verified.json()["verified"] is True
    late = await client.post(
        url + "/cases", json={"cases": [case("accuracy", "e00")]}, headers=headers
    )
    problem(late, 409)
    assert orjson.loads(raw.content)["checks"][0]["check_id"] == "accuracy"


async def _fully_run_report(
    project: Project, client: httpx.AsyncClient
) -> tuple[dict[str, str], dict[str, Any]]:
    """An admin's headers and the report of an evaluation given every case (`full_run`)."""
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await full_run(client, headers)
    finish = f"/api/v1/evaluations/{evaluation['evaluation_id']}/finish"
    return headers, (await client.post(finish, headers=headers)).json()


async def test_body_matches_the_schema_and_evidence(
    project: Project, client: httpx.AsyncClient
) -> None:
    from app.schemas.reports import ReportBody

    _, report = await _fully_run_report(project, client)
    body = ReportBody.model_validate(report["body"])
    assert body.subject.get("repo") == "acme/web"
    assert body.suite_ref.name == "rag" and body.dataset_refs[0].name == "qa"
    helpfulness = report["body"]["checks"][2]
    assert helpfulness["evidence_manifest"] is True and len(helpfulness["evidence_refs"]) == 1
    accuracy = report["body"]["checks"][0]
    assert (
        accuracy["evidence_refs"][0]
        == "sha256:" + hashlib.sha256(rfc8785.dumps({"a": 0})).hexdigest()
    )


async def test_cancel_records_pending_cases(project: Project, client: httpx.AsyncClient) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    await client.post(
        url + "/cases", json={"cases": [case("accuracy", "e00", output={"a": 1})]}, headers=headers
    )
    cancelled = await client.post(url + "/cancel", headers=headers)
    assert cancelled.status_code == 201, cancelled.text
    body = cancelled.json()["body"]
    assert [c["status"] for c in body["checks"]] == ["cancelled", "cancelled", "cancelled"]
    assert body["result"] == "inconclusive"
    status = (await client.get(url, headers=headers)).json()
    assert status["status"] == "cancelled" and status["received_cases"] == 48
    assert status["checks"][0]["by_status"] == {"pass": 1, "cancelled": 11}
    again = await client.post(url + "/finish", headers=headers)
    assert again.status_code == 200 and again.json()["report_id"] == cancelled.json()["report_id"]


async def test_report_reads_need_permission_and_project(
    project: Project, other_project: Project, client: httpx.AsyncClient
) -> None:
    from tests.conftest import auth

    headers, report = await _fully_run_report(project, client)
    eid = report["body"]["evaluation_id"]
    rid = report["report_id"]
    paths = [
        f"/evaluations/api/reports/{rid}",
        f"/evaluations/api/reports/{rid}/body",
        f"/api/v1/evaluations/{eid}/report",
    ]
    writer = auth(await project.token("evaluation.write"))
    peer = auth(await project.token(kind="peer"))
    for path in paths:
        problem(await client.get(path), 401)
        problem(await client.get(path, headers=writer), 403)
        problem(await client.get(path, headers=peer), 403)
        problem(await client.get(path, headers=await other_project.admin()), 404)
    digest = report["body"]["subject"]["digest"]
    for_subject = await client.get(
        "/evaluations/api/reports/forSubject", params={"digest": digest}, headers=peer
    )
    assert for_subject.status_code == 200 and len(for_subject.json()["reports"]) == 1
    other = await client.get(
        "/evaluations/api/reports/forSubject",
        params={"digest": digest},
        headers=await other_project.admin(),
    )
    assert other.json() == {"subject_digest": digest, "reports": []}
    problem(
        await client.post(
            "/evaluations/api/reports/verify",
            json={"report_id": rid},
            headers=await other_project.admin(),
        ),
        404,
    )
    problem(
        await client.post(
            "/evaluations/api/reports/verify", json={"report_id": "x"}, headers=headers
        ),
        422,
    )
    problem(
        await client.post(
            "/evaluations/api/reports/verify", json={"report_id": rid, "x": 1}, headers=headers
        ),
        422,
    )
    problem(
        await client.post(
            "/evaluations/api/reports/verify",
            content=b'{"report_id": 1, "report_id": 2}',
            headers={**headers, "Content-Type": "application/json"},
        ),
        422,
    )
    problem(await client.get("/evaluations/api/reports/not-a-uuid", headers=headers), 404)
    problem(
        await client.get(
            f"/api/v1/evaluations/{eid}/report",
            headers=await other_project.admin(),
        ),
        404,
    )
    problem(
        await client.post(
            f"/api/v1/evaluations/{eid}/finish",
            headers=await other_project.admin(),
        ),
        404,
    )
    problem(
        await client.post(
            f"/api/v1/evaluations/{eid}/finish",
            headers=auth(await project.token("report.read")),
        ),
        403,
    )


async def test_report_404_until_issued(project: Project, client: httpx.AsyncClient) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    problem(
        await client.get(
            f"/api/v1/evaluations/{evaluation['evaluation_id']}/report", headers=headers
        ),
        404,
    )


async def test_manifest_digest_from_stored_cases(
    project: Project, client: httpx.AsyncClient, db
) -> None:
    from sqlalchemy import text

    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    cases = []
    for i in reversed(range(12)):
        extra: dict[str, Any] = {"output": {"a": i}}
        if i % 3 == 0:
            extra["evidence_refs"] = [f"sha256:{i:064x}", f"sha256:{i + 100:064x}"]
        if i % 4 == 0:
            extra["trace_ref"] = {"id": f"t{i}", "digest": f"sha256:{i + 200:064x}"}
        cases.append(case("accuracy", f"e{i:02d}", **extra))
    await client.post(url + "/cases", json={"cases": cases}, headers=headers)
    report = (await client.post(url + "/finish", headers=headers)).json()
    expected: list[str] = []
    for item in sorted(cases, key=lambda c: c["example_id"]):
        expected.append("sha256:" + hashlib.sha256(rfc8785.dumps(item["output"])).hexdigest())
        if "trace_ref" in item:
            expected.append(item["trace_ref"]["digest"])
        expected.extend(item.get("evidence_refs", []))
    accuracy = report["body"]["checks"][0]
    assert accuracy["evidence_manifest"] is True
    assert accuracy["evidence_refs"] == [
        "sha256:" + hashlib.sha256(rfc8785.dumps(expected)).hexdigest()
    ]
    async with db() as session:
        stored = (
            await session.execute(
                text(
                    "SELECT digests, digest FROM evidence_manifests WHERE report_id = :r AND check_id = 'accuracy'"
                ),
                {"r": report["report_id"]},
            )
        ).one()
    assert document_of(stored[0]) == rfc8785.dumps(expected)
    assert stored[0] == b"".join(bytes.fromhex(d.removeprefix("sha256:")) for d in expected)
    assert stored[1] == accuracy["evidence_refs"][0]
