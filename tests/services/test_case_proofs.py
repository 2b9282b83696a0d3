"""Every case bound to the report: the cases root of each check (and of the baseline's cases),
and one case proven against it through the case-proof endpoint (RFC 6962 audit paths)."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import httpx
import pytest
import rfc8785
from fastapi import FastAPI

from app.digest import merkle
from tests.bundle_helpers import comparative_suite, issue
from tests.conftest import Project, auth, new_project
from tests.factories import behind_the_triggers, case, define_suite, problem, start_evaluation
from tests.pages_helpers import sign_in


def _cases(shift: float) -> list[dict[str, Any]]:
    cases = []
    for i in range(12):
        extra: dict[str, Any] = {"output": {"answer": f"a{i}", "shift": shift}}
        if i % 4 == 1:
            extra["trace_ref"] = {"id": f"trace-{i}", "digest": "sha256:" + f"{i:02d}" * 32}
        if i == 2:
            extra["evidence_refs"] = ["sha256:" + "ab" * 32, "sha256:" + "cd" * 32]
        if i == 5:
            extra["assurance"] = "reported"
        cases.append(case("accuracy", f"e{i:02d}", status="pass" if i % 6 else "fail", **extra))
    cases += [case("no_harm", f"e{i:02d}", status="error" if i == 7 else "pass") for i in range(11)]
    cases += [
        case("helpfulness", f"e{i:02d}", r, score=min(1.0, 0.55 + shift + i / 40 + r * 1e-7))
        for i in range(12)
        for r in range(2)
    ]
    return cases


def _records(cases: list[dict[str, Any]], check_id: str, scorers: dict[str, str]) -> list[bytes]:
    """The check's case records in case order, by the reference RFC 8785 implementation."""
    mine = [c for c in cases if c["check_id"] == check_id]
    mine.sort(key=lambda c: (c["example_id"].encode(), c["repeat"]))
    out = []
    for c in mine:
        output = c.get("output")
        record = {
            "example_id": c["example_id"],
            "repeat": c["repeat"],
            "status": c["status"],
            "score": None if c.get("score") is None else float(c["score"]),
            "output_digest": None
            if output is None
            else "sha256:" + hashlib.sha256(rfc8785.dumps(output)).hexdigest(),
            "trace_digest": (c.get("trace_ref") or {}).get("digest"),
            "evidence_refs": c.get("evidence_refs") or [],
            "assurance": c.get("assurance", "platform_verified"),
            "scorer_digest": scorers[check_id],
        }
        out.append(rfc8785.dumps(record))
    return out


def _root(records: list[bytes]) -> str:
    return merkle.hex_digest(merkle.root([merkle.leaf_hash(r) for r in records]))


@pytest.fixture
async def compared(project: Project, client: httpx.AsyncClient) -> dict[str, Any]:
    headers = await project.admin()
    await define_suite(client, headers, body=comparative_suite())
    baseline_cases, candidate_cases = _cases(0.0), _cases(0.05)
    baseline = await issue(client, headers, baseline_cases, mode="experiment")
    report = await issue(
        client,
        headers,
        candidate_cases,
        baseline_evaluation_id=baseline["body"]["evaluation_id"],
    )
    scorers = {c["check_id"]: c["scorer_ref"]["digest"] for c in report["body"]["checks"]}
    return {
        "headers": headers,
        "baseline": baseline,
        "report": report,
        "candidate_cases": candidate_cases,
        "baseline_cases": baseline_cases,
        "scorers": scorers,
    }


async def test_the_body_commits_to_every_case_and_the_baselines(compared: dict[str, Any]) -> None:
    report, baseline, scorers = compared["report"], compared["baseline"], compared["scorers"]
    for check in report["body"]["checks"]:
        records = _records(compared["candidate_cases"], check["check_id"], scorers)
        assert check["cases"] == {"count": len(records), "root": _root(records)}
        base = _records(compared["baseline_cases"], check["check_id"], scorers)
        comparison = check["comparison"]
        if comparison is None:  # all_pass checks are not compared
            assert check["aggregation"]["method"] == "all_pass"
            continue
        assert comparison["baseline_cases"] == {"count": len(base), "root": _root(base)}
        assert comparison["baseline_report_digest"] == baseline["digest"]
        for item in check["slices"]:
            assert item["comparison"] is None or "baseline_cases" not in item["comparison"]
    # The baseline, itself a plain report, commits to its own cases the same way.
    for check in baseline["body"]["checks"]:
        records = _records(compared["baseline_cases"], check["check_id"], scorers)
        assert check["cases"]["root"] == _root(records)


async def test_every_case_is_provable_alone(
    compared: dict[str, Any], client: httpx.AsyncClient, project: Project
) -> None:
    report, headers = compared["report"], compared["headers"]
    rid = report["report_id"]
    reader = auth(await project.token("report.read"))
    for baseline, cases in (
        (False, compared["candidate_cases"]),
        (True, compared["baseline_cases"]),
    ):
        for check in report["body"]["checks"]:
            if baseline and check["comparison"] is None:
                continue
            tree = check["comparison"]["baseline_cases"] if baseline else check["cases"]
            records = _records(cases, check["check_id"], compared["scorers"])
            for index, record in enumerate(records):
                example, repeat = _key(record)
                url = f"/evaluations/api/reports/{rid}/cases/{check['check_id']}/{example}/{repeat}"
                answer = await client.get(
                    url, params={"baseline": "true"} if baseline else None, headers=reader
                )
                assert answer.status_code == 200, answer.text
                proof = answer.json()
                assert rfc8785.dumps(proof["record"]) == record
                assert (proof["leaf_index"], proof["tree_size"]) == (index, tree["count"])
                assert proof["root"] == tree["root"] and proof["baseline"] is baseline
                assert "output" not in proof  # report.read alone: no output
                path = [merkle.from_hex_digest(d) for d in proof["audit_path"]]
                assert merkle.verify_inclusion(
                    merkle.leaf_hash(record),
                    index,
                    tree["count"],
                    path,
                    merkle.from_hex_digest(tree["root"]),
                )
    # With dataset.read_body the output comes too.
    url = f"/evaluations/api/reports/{rid}/cases/accuracy/e03/0"
    proof = (await client.get(url, headers=headers)).json()
    assert proof["output"] == {"answer": "a3", "shift": 0.05}


def _key(record: bytes) -> tuple[str, int]:
    fields = json.loads(record)
    return fields["example_id"], fields["repeat"]


async def test_cancelled_cases_are_leaves_like_any_other(
    project: Project, client: httpx.AsyncClient
) -> None:
    """Cancelling records `cancelled` for every pending case in SQL; those leaves equal the
    ones the reference implementation computes (and the proof endpoint re-derives)."""
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    sent = [case("accuracy", "e00", score=None), case("helpfulness", "e01", 1, score=0.25)]
    response = await client.post(url + "/cases", json={"cases": sent}, headers=headers)
    assert response.status_code == 200, response.text
    report = (await client.post(url + "/cancel", headers=headers)).json()
    scorers = {c["check_id"]: c["scorer_ref"]["digest"] for c in report["body"]["checks"]}
    repeats = {"accuracy": 1, "no_harm": 1, "helpfulness": 2}
    for check in report["body"]["checks"]:
        check_id = check["check_id"]
        everything = [
            next(
                (
                    c
                    for c in sent
                    if (c["check_id"], c["example_id"], c["repeat"]) == (check_id, f"e{i:02d}", r)
                ),
                case(check_id, f"e{i:02d}", r, status="cancelled"),
            )
            for i in range(12)
            for r in range(repeats[check_id])
        ]
        records = _records(everything, check_id, scorers)
        assert check["cases"] == {"count": len(records), "root": _root(records)}
    proof = await client.get(
        f"/evaluations/api/reports/{report['report_id']}/cases/no_harm/e11/0", headers=headers
    )
    assert proof.status_code == 200, proof.text
    assert proof.json()["record"]["status"] == "cancelled"


async def test_refusals(
    compared: dict[str, Any], client: httpx.AsyncClient, project: Project, db: Any
) -> None:
    report, headers = compared["report"], compared["headers"]
    rid = report["report_id"]
    base = f"/evaluations/api/reports/{rid}/cases"
    assert (
        "Traceback"
        not in problem(await client.get(base + "/accuracy/e99/0", headers=headers), 404)["detail"]
    )
    problem(await client.get(base + "/accuracy/e00/1", headers=headers), 404)
    problem(await client.get(base + "/nope/e00/0", headers=headers), 404)
    problem(
        await client.get(
            f"/evaluations/api/reports/{uuid.uuid4()}/cases/accuracy/e00/0", headers=headers
        ),
        404,
    )
    problem(await client.get(base + "/accuracy/e00/-1", headers=headers), 422)
    problem(await client.get(base + "/accuracy/e00/x", headers=headers), 422)
    problem(await client.get(base + "/accuracy/e%20x/0", headers=headers), 422)
    problem(await client.get(base + "/accuracy/e00/0?baseline=maybe", headers=headers), 422)
    problem(await client.get(base + "/accuracy/e00/0"), 401)
    problem(
        await client.get(
            base + "/accuracy/e00/0", headers=auth(await project.token("evaluation.write"))
        ),
        403,
    )
    # An all_pass check is not compared; the baseline report has no baseline of its own.
    problem(await client.get(base + "/no_harm/e00/0?baseline=true", headers=headers), 404)
    baseline_id = compared["baseline"]["report_id"]
    problem(
        await client.get(
            f"/evaluations/api/reports/{baseline_id}/cases/accuracy/e00/0",
            params={"baseline": "true"},
            headers=headers,
        ),
        404,
    )
    # Another project's token sees no such report.
    other = await new_project(db, client)
    problem(await client.get(base + "/accuracy/e00/0", headers=await other.admin()), 404)


async def test_a_case_changed_behind_the_service_is_refused(
    compared: dict[str, Any], client: httpx.AsyncClient, database_url: str
) -> None:
    report, headers = compared["report"], compared["headers"]
    rid = uuid.UUID(report["report_id"])
    url = f"/evaluations/api/reports/{rid}/cases/helpfulness/e04/1"
    assert (await client.get(url, headers=headers)).status_code == 200
    await behind_the_triggers(
        database_url,
        rid,
        "UPDATE cases SET score = 0.99 WHERE evaluation_id ="
        " (SELECT evaluation_id FROM reports WHERE id = $1)"
        " AND check_id = 'helpfulness' AND example_id = 'e04' AND repeat = 1",
    )
    refused = problem(await client.get(url, headers=headers), 409)
    assert "no longer matches its leaf" in refused["detail"]
    assert refused["type"].endswith("/integrity")


async def test_the_pages_show_the_root_and_offer_each_proof(
    compared: dict[str, Any], project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any
) -> None:
    report = compared["report"]
    rid = report["report_id"]
    helpfulness = next(c for c in report["body"]["checks"] if c["check_id"] == "helpfulness")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as browser:
        await sign_in(browser, await project.token("report.read"))
        page = await browser.get(f"/reports/{rid}")
        assert page.status_code == 200
        assert "24 cases bound by the Merkle root" in page.text
        assert helpfulness["cases"]["root"][:19] in page.text
        cases = await browser.get(f"/reports/{rid}/checks/helpfulness/examples/e04")
        link = f"/reports/{rid}/cases/helpfulness/e04/1/proof"
        assert f'href="{link}"' in cases.text and helpfulness["cases"]["root"] in cases.text
        proof = await browser.get(link)
        assert proof.status_code == 200
        assert proof.headers["content-disposition"].startswith("attachment")
        answer = proof.json()
        assert merkle.verify_inclusion(
            merkle.leaf_hash(rfc8785.dumps(answer["record"])),
            answer["leaf_index"],
            answer["tree_size"],
            [merkle.from_hex_digest(d) for d in answer["audit_path"]],
            merkle.from_hex_digest(helpfulness["cases"]["root"]),
        )
        assert (
            await browser.get(f"/reports/{rid}/cases/helpfulness/e04/9/proof")
        ).status_code == 404
        other = await new_project(db, client)
        await sign_in(browser, await other.token("report.read"))
        assert (await browser.get(link)).status_code == 404
