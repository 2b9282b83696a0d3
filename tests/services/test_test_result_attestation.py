"""The in-toto test-result attestation of a report (docs/exports.md): a DSSE envelope that
securesystemslib verifies with the report's key, over a Statement v1 that in-toto-attestation
parses, whose predicate parses as in-toto's TestResult message and says what the body says.
Implementations we did not write are the oracles; the mapping rules are the contract's."""

from __future__ import annotations

import base64

import httpx
import orjson
from google.protobuf import json_format
from in_toto_attestation.predicates.test_result.v0 import test_result_pb2 as in_toto_test_result
from in_toto_attestation.v1 import resource_descriptor_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope

from app.digest.signing import ENVELOPE_MEDIA_TYPE, STATEMENT_TYPE
from app.formats.test_result import TEST_RESULT_PREDICATE
from tests.conftest import Project
from tests.factories import define_suite, finished, first_report, problem
from tests.services.test_signing import keys_by_id, sslib_key

SUBJECT = {"digest": "sha1:" + "4e" * 20, "name": "acme/web"}


def path(report_id: str) -> str:
    return f"/evaluations/api/reports/{report_id}/attestation"


async def test_result_statement_verifies_and_says_what_the_body_says(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    report = await finished(client, headers, subject=SUBJECT)
    answer = await client.get(
        path(report["report_id"]), params={"predicate": "test-result"}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == ENVELOPE_MEDIA_TYPE
    document = orjson.loads(answer.content)

    # Signed by the key that signed the report, and securesystemslib agrees.
    own = orjson.loads((await client.get(path(report["report_id"]), headers=headers)).content)
    assert document["signatures"][0]["keyid"] == own["signatures"][0]["keyid"]
    entry = (await keys_by_id(client))[document["signatures"][0]["keyid"]]
    assert list(Envelope.from_dict(dict(document)).verify([sslib_key(entry)], 1)) == [
        entry["keyid"]
    ]

    statement = orjson.loads(base64.b64decode(document["payload"]))
    Statement(
        [ResourceDescriptor(**s).pb for s in statement["subject"]],
        statement["predicateType"],
        statement["predicate"],
    ).validate()
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicateType"] == TEST_RESULT_PREDICATE
    assert statement["subject"] == [{"name": "acme/web", "digest": {"sha1": "4e" * 20}}]
    predicate = statement["predicate"]
    parsed = json_format.ParseDict(predicate, in_toto_test_result.TestResult())
    for descriptor in predicate["configuration"]:
        # JSON field names (mediaType) as the protobuf's JSON mapping reads them.
        pb = json_format.ParseDict(descriptor, resource_descriptor_pb2.ResourceDescriptor())
        ResourceDescriptor.copy_from_pb(pb).validate()

    body = report["body"]
    expected_result = {"pass": "PASSED", "fail": "FAILED", "error": "FAILED"}
    assert parsed.result == expected_result.get(body["result"], "WARNED")
    placed: dict[str, list[str]] = {"passedTests": [], "warnedTests": [], "failedTests": []}
    for check in body["checks"]:
        named = [(check["check_id"], check["result"])] + [
            (f"{check['check_id']}/{s['name']}", s["result"]) for s in check["slices"]
        ]
        for name, result in named:
            where = {"pass": "passedTests", "fail": "failedTests", "error": "failedTests"}
            placed[where.get(result, "warnedTests")].append(name)
    assert {k: predicate[k] for k in placed} == placed
    assert any("accuracy/german" in names for names in placed.values())

    page = report["envelope"]["url"]
    assert parsed.url == page
    by_name = {d["name"]: d for d in predicate["configuration"]}
    suite = body["suite_ref"]
    assert by_name[f"suite {suite['name']} version {suite['version']}"]["digest"] == {
        "sha256": suite["digest"].removeprefix("sha256:")
    }
    report_descriptor = by_name[f"report {report['report_id']}"]
    assert report_descriptor["uri"] == page
    assert report_descriptor["digest"] == {"sha256": report["digest"].removeprefix("sha256:")}
    refs = [c["scorer_ref"] for c in body["checks"]]
    scorers = {f"scorer {r['name']} version {r['version']}" for r in refs}
    datasets = {f"dataset {d['name']} version {d['version']}" for d in body["dataset_refs"]}
    assert scorers | datasets <= set(by_name) and len(by_name) == len(scorers | datasets) + 2

    # Ed25519 signs deterministically: the same statement, the same bytes every time.
    again = await client.get(
        path(report["report_id"]), params={"predicate": "test-result"}, headers=headers
    )
    assert again.content == answer.content


async def test_report_is_still_the_default_predicate(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers, report = await first_report(project, client)
    default = await client.get(path(report["report_id"]), headers=headers)
    named = await client.get(
        path(report["report_id"]), params={"predicate": "report"}, headers=headers
    )
    assert default.status_code == named.status_code == 200
    assert default.content == named.content
    statement = orjson.loads(base64.b64decode(orjson.loads(default.content)["payload"]))
    assert statement["predicateType"] == "https://evalbook.dev/attestations/report/v1"


async def test_test_result_refuses_what_it_should(
    project: Project, other_project: Project, client: httpx.AsyncClient
) -> None:
    headers, report = await first_report(project, client)
    url = path(report["report_id"])
    wanted = {"predicate": "test-result"}
    unknown = problem(await client.get(url, params={"predicate": "slsa"}, headers=headers), 422)
    assert "'report'" in unknown["detail"] and "'test-result'" in unknown["detail"], unknown
    problem(await client.get(url, params=wanted), 401)
    writer = {"Authorization": f"Bearer {await project.token('evaluation.write')}"}
    problem(await client.get(url, params=wanted, headers=writer), 403)
    problem(await client.get(url, params=wanted, headers=await other_project.admin()), 404)
    missing = path("00000000-0000-4000-8000-000000000000")
    problem(await client.get(missing, params=wanted, headers=headers), 404)
