"""Signed reports: every report issued carries an in-toto Statement v1 in a DSSE envelope, signed
by the key active when it was issued. The envelope is verified by securesystemslib and the
statement parsed by in-toto-attestation (implementations we did not write)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import orjson
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from fastapi import FastAPI
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey
from sqlalchemy import text

from app.api.main import create_app
from app.api.state import state_of
from app.digest.signing import (
    ENVELOPE_MEDIA_TYPE,
    REPORT_PREDICATE,
    STATEMENT_TYPE,
    KeyFileError,
    verify_envelope,
)
from app.platform.config import Settings, to_plain_url
from app.platform.db import migrate_async
from app.services import projects, signing
from app.services.provisioning import provision
from tests.conftest import Project, run_cli
from tests.factories import behind_the_triggers, define_suite, problem, start_evaluation

KEYS = "/.well-known/evalbook/keys"


@dataclass
class OwnService:
    """A service on a database of its own, with generated keys (no key file): rotation."""

    app: FastAPI
    client: httpx.AsyncClient
    headers: dict[str, str]
    url: str
    data_dir: Path
    project_id: uuid.UUID


@pytest.fixture
async def own_service(
    database_url: str, settings: Settings, tmp_path: Path
) -> AsyncIterator[OwnService]:
    """The shared application signs with a key file; rotating keys needs a service that
    generates them, and a database no other test signs on."""
    name = f"evalbook_keys_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(to_plain_url(database_url))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = urlunsplit(urlsplit(database_url)._replace(path=f"/{name}"))
    try:
        await migrate_async(url)
        own = settings.model_copy(
            update={"database_url": url, "data_dir": tmp_path, "signing_key_file": None}
        )
        await provision(url, own)
        application = create_app(own)
        async with application.router.lifespan_context(application):
            state = state_of(application)
            async with state.sessionmaker() as session, session.begin():
                project, _ = await projects.create_project(session, "keys/demo")
                _, token = await projects.create_token(
                    session, project.id, "admin", ["admin"], "runner", "platform_verified"
                )
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(
                transport=transport, base_url="https://evalbook.test"
            ) as http:
                yield OwnService(
                    application,
                    http,
                    {"Authorization": f"Bearer {token}"},
                    url,
                    tmp_path,
                    project.id,
                )
    finally:
        admin = await asyncpg.connect(to_plain_url(database_url))
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def issue(client: httpx.AsyncClient, headers: dict[str, str], digest: str) -> dict[str, Any]:
    """A report (its evaluation finished with no case: the verdict does not matter here)."""
    started = await start_evaluation(
        client, headers, subject={"digest": digest, "name": "acme/web"}
    )
    answer = await client.post(
        f"/api/v1/evaluations/{started['evaluation_id']}/finish", headers=headers
    )
    assert answer.status_code == 201, answer.text
    report: dict[str, Any] = answer.json()
    return report


async def keys_by_id(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    answer = await client.get(KEYS)
    assert answer.status_code == 200, answer.text
    return {key["keyid"]: key for key in answer.json()["keys"]}


def sslib_key(entry: dict[str, Any]) -> SSlibKey:
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(entry["public_key"]))
    return SSlibKey.from_crypto(public, keyid=entry["keyid"])


async def attestation(client: httpx.AsyncClient, headers: dict[str, str], report_id: str) -> bytes:
    answer = await client.get(f"/evaluations/api/reports/{report_id}/attestation", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == ENVELOPE_MEDIA_TYPE
    return answer.content


async def test_a_report_is_signed_and_securesystemslib_verifies_it(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    report = await issue(client, headers, "sha1:" + "ab" * 20)
    envelope_bytes = await attestation(client, headers, report["report_id"])
    keys = await keys_by_id(client)
    document = orjson.loads(envelope_bytes)
    (signature,) = document["signatures"]
    entry = keys[signature["keyid"]]
    assert entry["status"] == "active" and entry["alg"] == "ed25519"
    raw = base64.b64decode(entry["public_key"])
    assert entry["keyid"] == "sha256:" + hashlib.sha256(raw).hexdigest()

    # securesystemslib: the DSSE signature over the PAE verifies with the published key.
    envelope = Envelope.from_dict(document)
    verified = envelope.verify([sslib_key(entry)], 1)
    assert list(verified) == [entry["keyid"]]
    # in-toto-attestation: the payload is a valid Statement v1.
    payload = base64.b64decode(document["payload"])
    statement = orjson.loads(payload)
    parsed = Statement(
        [ResourceDescriptor(**subject).pb for subject in statement["subject"]],
        statement["predicateType"],
        statement["predicate"],
    )
    parsed.validate()
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicateType"] == REPORT_PREDICATE
    assert statement["subject"] == [{"name": "acme/web", "digest": {"sha1": "ab" * 20}}]
    predicate = statement["predicate"]
    assert predicate["report_id"] == report["report_id"]
    assert predicate["report_digest"] == report["digest"]
    # The predicate's body is the stored report body, byte for byte once canonical.
    body = await client.get(f"/evaluations/api/reports/{report['report_id']}/body", headers=headers)
    assert rfc8785.dumps(predicate["body"]) == body.content
    assert "sha256:" + hashlib.sha256(body.content).hexdigest() == report["digest"]
    # The payload is the statement's canonical JSON (built around the body's bytes).
    assert payload == rfc8785.dumps(statement)
    # Our own verifier agrees, and refuses a changed payload or signature.
    assert verify_envelope(envelope_bytes, {entry["keyid"]: raw}) == statement
    forged = dict(
        document, payload=base64.b64encode(payload.replace(b'"inconclusive"', b'"pass"')).decode()
    )
    with pytest.raises(ValueError):
        verify_envelope(orjson.dumps(forged), {entry["keyid"]: raw})
    with pytest.raises(Exception):  # noqa: B017 (securesystemslib's own VerificationError)
        Envelope.from_dict(forged).verify([sslib_key(entry)], 1)


async def test_the_attestation_endpoint_refuses_what_it_should(
    project: Project, other_project: Project, client: httpx.AsyncClient, database_url: str
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    report = await issue(client, headers, "sha1:" + "cd" * 20)
    path = f"/evaluations/api/reports/{report['report_id']}/attestation"
    problem(await client.get(path), 401)
    writer = {"Authorization": f"Bearer {await project.token('evaluation.write')}"}
    problem(await client.get(path, headers=writer), 403)
    problem(await client.get(path, headers=await other_project.admin()), 404)
    problem(
        await client.get(f"/evaluations/api/reports/{uuid.uuid4()}/attestation", headers=headers),
        404,
    )
    assert (
        await client.get("/evaluations/api/reports/not-a-uuid/attestation", headers=headers)
    ).status_code in (404, 422)
    # A report from before signing (its attestation removed behind the triggers) says so.
    await behind_the_triggers(
        database_url,
        uuid.UUID(report["report_id"]),
        "DELETE FROM report_attestations WHERE report_id = $1",
    )
    refused = problem(await client.get(path, headers=headers), 404)
    assert "before reports were signed" in refused["detail"]


async def test_attestations_and_keys_are_append_only(
    project: Project, client: httpx.AsyncClient, db: Any
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    report = await issue(client, headers, "sha1:" + "ef" * 20)
    for statement in (
        "UPDATE report_attestations SET envelope = 'x' WHERE report_id = :id",
        "DELETE FROM report_attestations WHERE report_id = :id",
        "DELETE FROM signing_keys",
        "UPDATE signing_keys SET status = 'active' WHERE status = 'retired'",
        "UPDATE signing_keys SET public_key = public_key WHERE status = 'active'",
    ):
        with pytest.raises(Exception, match=r"append-only|only active -> retired|no rows"):
            async with db() as session, session.begin():
                result = await session.execute(text(statement), {"id": report["report_id"]})
                if result.rowcount == 0:
                    raise LookupError("no rows")


async def test_rotation_keeps_old_reports_verifiable(own_service: OwnService) -> None:
    client, headers = own_service.client, own_service.headers
    await define_suite(client, headers)
    before = await issue(client, headers, "sha1:" + "01" * 20)
    state = state_of(own_service.app)
    async with state.sessionmaker() as session, session.begin():
        rotated = await signing.rotate(session, state.signer)
    after = await issue(client, headers, "sha1:" + "02" * 20)
    keys = await keys_by_id(client)
    old_env = orjson.loads(await attestation(client, headers, before["report_id"]))
    new_env = orjson.loads(await attestation(client, headers, after["report_id"]))
    old_key, new_key = old_env["signatures"][0]["keyid"], new_env["signatures"][0]["keyid"]
    assert new_key == rotated.keyid != old_key
    assert keys[old_key]["status"] == "retired" and keys[old_key]["retired_at"]
    assert keys[new_key]["status"] == "active"
    Envelope.from_dict(old_env).verify([sslib_key(keys[old_key])], 1)
    Envelope.from_dict(new_env).verify([sslib_key(keys[new_key])], 1)
    with pytest.raises(Exception):  # noqa: B017
        Envelope.from_dict(old_env).verify([sslib_key(keys[new_key])], 1)


async def test_rotation_racing_issuance_signs_with_a_key_active_at_issue_time(
    own_service: OwnService,
) -> None:
    """Finishes and rotations at once: each report's signing key was active when it was
    issued (created before, retired after)."""
    client, headers = own_service.client, own_service.headers
    await define_suite(client, headers)
    evaluations = [
        (await start_evaluation(client, headers, subject={"digest": f"sha1:{i:040x}"}))[
            "evaluation_id"
        ]
        for i in range(12)
    ]
    state = state_of(own_service.app)

    async def rotate_a_few() -> None:
        for _ in range(4):
            async with state.sessionmaker() as session, session.begin():
                await signing.rotate(session, state.signer)
            await asyncio.sleep(0)

    async def finish(evaluation: str) -> httpx.Response:
        return await client.post(f"/api/v1/evaluations/{evaluation}/finish", headers=headers)

    results = await asyncio.gather(rotate_a_few(), *(finish(e) for e in evaluations))
    answers = [r for r in results if isinstance(r, httpx.Response)]
    assert all(a.status_code == 201 for a in answers), [a.text for a in answers]
    async with state.sessionmaker() as session:
        rows = (
            await session.execute(
                text(
                    "SELECT r.issued_at, k.created_at, k.retired_at FROM reports r "
                    "JOIN report_attestations a ON a.report_id = r.id "
                    "JOIN signing_keys k ON k.keyid = a.keyid WHERE r.project_id = :p"
                ),
                {"p": own_service.project_id},
            )
        ).all()
    assert len(rows) == 12
    for issued_at, created_at, retired_at in rows:
        assert created_at <= issued_at and (retired_at is None or issued_at < retired_at)


async def test_a_configured_key_file_signs_and_a_bad_one_is_named(
    project: Project,
    client: httpx.AsyncClient,
    settings: Settings,
    signing_key_file: Path,
    tmp_path: Path,
    database_url: str,
) -> None:
    from cryptography.hazmat.primitives import serialization

    from app.digest.signing import load_private_key

    headers = await project.admin()
    await define_suite(client, headers)
    report = await issue(client, headers, "sha1:" + "77" * 20)
    envelope = orjson.loads(await attestation(client, headers, report["report_id"]))
    public = load_private_key(signing_key_file).public_key()
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert envelope["signatures"][0]["keyid"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    # A service whose key comes from a file does not rotate: the file is the key.
    state = state_of(client._transport.app)  # type: ignore[attr-defined]
    with pytest.raises(KeyFileError, match="replace that file"):
        async with state.sessionmaker() as session, session.begin():
            await signing.rotate(session, state.signer)

    for content, reason in (
        (b"not a key", "not an unencrypted PKCS#8 PEM key"),
        (
            __import__("cryptography.hazmat.primitives.asymmetric.ec", fromlist=["ec"])
            .generate_private_key(
                __import__(
                    "cryptography.hazmat.primitives.asymmetric.ec", fromlist=["ec"]
                ).SECP256R1()
            )
            .private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
            "not an Ed25519 key",
        ),
    ):
        bad = tmp_path / "bad.pem"
        bad.write_bytes(content)
        broken = create_app(settings.model_copy(update={"signing_key_file": bad}))
        with pytest.raises(KeyFileError, match=f"{bad}: {reason}"):
            async with broken.router.lifespan_context(broken):
                pass
        served = run_cli(database_url, "serve", "--port", "1", EVALBOOK_SIGNING_KEY_FILE=str(bad))
        assert served.returncode == 2 and str(bad) in served.stderr and reason in served.stderr
    missing = run_cli(
        database_url, "serve", "--port", "1", EVALBOOK_SIGNING_KEY_FILE=str(tmp_path / "none.pem")
    )
    assert missing.returncode == 2 and "none.pem: cannot be read" in missing.stderr


async def test_keys_commands_list_and_rotate(own_service: OwnService) -> None:
    client, database_url = own_service.client, own_service.url
    env = {"EVALBOOK_DATA_DIR": str(own_service.data_dir)}
    before = await keys_by_id(client)
    listed = run_cli(database_url, "keys", "list", **env)
    assert listed.returncode == 0, listed.stderr
    assert all(keyid in listed.stdout for keyid in before)
    rotated = run_cli(database_url, "keys", "rotate", **env)
    assert rotated.returncode == 0, rotated.stderr
    after = await keys_by_id(client)
    (new,) = set(after) - set(before)
    assert after[new]["status"] == "active"
    assert f"{new} active" in rotated.stdout
    assert sum(1 for k in after.values() if k["status"] == "active") == 1


async def supersession(client: httpx.AsyncClient, headers: dict[str, str], report_id: str) -> Any:
    served = await client.get(f"/evaluations/api/reports/{report_id}", headers=headers)
    url = served.json()["envelope"]["supersession_attestation"]
    assert url is not None and url.endswith(f"/reports/{report_id}/supersession-attestation")
    answer = await client.get(url.removeprefix("https://evalbook.test"), headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == ENVELOPE_MEDIA_TYPE
    return orjson.loads(answer.content)


async def test_each_supersession_is_signed(project: Project, client: httpx.AsyncClient) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    first = await issue(client, headers, "sha1:" + "99" * 20)
    current = await client.get(f"/evaluations/api/reports/{first['report_id']}", headers=headers)
    envelope = current.json()["envelope"]
    assert envelope["supersession_attestation"] is None
    assert envelope["attestation"].endswith(f"/reports/{first['report_id']}/attestation")
    problem(
        await client.get(
            f"/evaluations/api/reports/{first['report_id']}/supersession-attestation",
            headers=headers,
        ),
        404,
    )
    second = await issue(client, headers, "sha1:" + "99" * 20)
    keys = await keys_by_id(client)
    document = await supersession(client, headers, first["report_id"])
    keyid = document["signatures"][0]["keyid"]
    Envelope.from_dict(document).verify([sslib_key(keys[keyid])], 1)
    statement = orjson.loads(base64.b64decode(document["payload"]))
    assert statement["predicateType"] == "https://evalbook.dev/attestations/supersession/v1"
    assert statement["subject"] == [{"name": "acme/web", "digest": {"sha1": "99" * 20}}]
    predicate = statement["predicate"]
    assert predicate["superseded_report_id"] == first["report_id"]
    assert predicate["superseded_report_digest"] == first["digest"]
    assert predicate["successor_report_id"] == second["report_id"]
    assert predicate["successor_report_digest"] == second["digest"]
    assert predicate["reason"] == "re_evaluation"
    superseded = await client.get(f"/evaluations/api/reports/{first['report_id']}", headers=headers)
    assert predicate["at"] == superseded.json()["envelope"]["superseded_at"]

    # A suite version's activation supersedes with no successor; that is signed too.
    from tests.factories import suite_body

    changed = suite_body()
    changed["validity_hours"] = 100
    answer = await client.put("/api/v1/suites/rag/versions/2", json=changed, headers=headers)
    assert answer.status_code == 201, answer.text
    answer = await client.post("/api/v1/suites/rag/versions/2/activate", headers=headers)
    assert answer.json()["superseded_report_ids"] == [second["report_id"]]
    document = await supersession(client, headers, second["report_id"])
    predicate = orjson.loads(base64.b64decode(document["payload"]))["predicate"]
    keyid = document["signatures"][0]["keyid"]
    # (securesystemslib's from_dict consumes the dict it reads)
    Envelope.from_dict(document).verify([sslib_key(keys[keyid])], 1)
    assert predicate["reason"] == "suite_version_activated"
    assert predicate["successor_report_id"] is None and predicate["successor_report_digest"] is None


async def test_for_subject_as_signed_verification_summaries(
    project: Project, client: httpx.AsyncClient
) -> None:
    """forSubject?format=vsa: a signed SLSA VSA v1 per current report, its predicate read by
    in-toto-attestation's VSA v1 message (unknown fields refused)."""
    from google.protobuf.json_format import ParseDict
    from in_toto_attestation.predicates.vsa.v1.vsa_pb2 import VerificationSummary

    headers = await project.admin()
    for path, body in (
        ("/api/v1/scorers/exact/versions/1", {"definition": {"kind": "exact"}}),
        (
            "/api/v1/datasets/two/versions/1",
            {"examples": [{"id": "a", "body": {}}, {"id": "b", "body": {}}]},
        ),
        (
            "/api/v1/suites/gate/versions/1",
            {
                "validity_hours": 24,
                "checks": [
                    {
                        "check_id": "accuracy",
                        "scorer": {"name": "exact", "version": "1"},
                        "dataset": {"name": "two", "version": "1"},
                        "aggregation": {"method": "pass_rate", "threshold": 0.5},
                    }
                ],
            },
        ),
    ):
        assert (await client.put(path, json=body, headers=headers)).status_code == 201
    digest = "sha1:" + "5a" * 20
    started = await start_evaluation(client, headers, suite="gate", subject={"digest": digest})
    evaluation = started["evaluation_id"]
    cases = [
        {"check_id": "accuracy", "example_id": e, "repeat": 0, "status": "pass", "output": {"e": e}}
        for e in ("a", "b")
    ]
    answer = await client.post(
        f"/api/v1/evaluations/{evaluation}/cases", json={"cases": cases}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    passing = (
        await client.post(f"/api/v1/evaluations/{evaluation}/finish", headers=headers)
    ).json()
    assert passing["body"]["result"] == "pass"
    await define_suite(client, headers)
    failing = await issue(client, headers, digest)
    assert failing["body"]["result"] != "pass"

    plain = await client.get(
        "/evaluations/api/reports/forSubject", params={"digest": digest}, headers=headers
    )
    assert len(plain.json()["reports"]) == 2 and "attestations" not in plain.json()
    answer = await client.get(
        "/evaluations/api/reports/forSubject",
        params={"digest": digest, "format": "vsa"},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["subject_digest"] == digest
    keys = await keys_by_id(client)
    results = {}
    for document in answer.json()["attestations"]:
        keyid = document["signatures"][0]["keyid"]
        statement = orjson.loads(base64.b64decode(document["payload"]))
        Envelope.from_dict(document).verify([sslib_key(keys[keyid])], 1)
        assert statement["predicateType"] == "https://slsa.dev/verification_summary/v1"
        (subject,) = statement["subject"]
        assert subject["digest"] == {"sha1": "5a" * 20}
        predicate = statement["predicate"]
        # in-toto-attestation's VSA v1 message (unknown fields refused) types verifiedLevels as
        # one string where the SLSA spec says an array of them: read the rest with it.
        ParseDict(
            {k: v for k, v in predicate.items() if k != "verifiedLevels"}, VerificationSummary()
        )
        assert predicate["verifier"]["id"] == "https://evalbook.test"
        assert predicate["resourceUri"] == digest
        (source,) = predicate["inputAttestations"]
        report_id = source["uri"].split("/reports/")[1].split("/")[0]
        signed = await attestation(client, headers, report_id)
        assert source["digest"] == {"sha256": hashlib.sha256(signed).hexdigest()}
        report = (await client.get(f"/evaluations/api/reports/{report_id}", headers=headers)).json()
        suite = report["body"]["suite_ref"]
        assert predicate["policy"] == {
            "uri": f"https://evalbook.test/api/v1/suites/{suite['name']}/versions/{suite['version']}",
            "digest": {"sha256": suite["digest"].removeprefix("sha256:")},
        }
        # SLSA VSA v1's rule: a FAILED verification's only level is FAILED.
        assert predicate["verifiedLevels"] == (
            ["EVALBOOK_ASSURANCE_" + report["body"]["assurance"].upper()]
            if predicate["verificationResult"] == "PASSED"
            else ["FAILED"]
        )
        assert subject["name"] == report["body"]["subject"].get("name", "subject")
        results[report_id] = predicate["verificationResult"]
    assert results == {passing["report_id"]: "PASSED", failing["report_id"]: "FAILED"}
    peer = {"Authorization": f"Bearer {await project.token(kind='peer')}"}
    as_peer = await client.get(
        "/evaluations/api/reports/forSubject",
        params={"digest": digest, "format": "vsa"},
        headers=peer,
    )
    assert as_peer.status_code == 200 and len(as_peer.json()["attestations"]) == 2
    problem(
        await client.get(
            "/evaluations/api/reports/forSubject",
            params={"digest": digest, "format": "pdf"},
            headers=headers,
        ),
        422,
    )


async def test_the_report_page_names_its_signer_and_offers_the_statement(
    project: Project, other_project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    from tests.pages_helpers import sign_in

    headers = await project.admin()
    await define_suite(client, headers)
    report = await issue(client, headers, "sha1:" + "3c" * 20)
    signed = await attestation(client, headers, report["report_id"])
    keyid = orjson.loads(signed)["signatures"][0]["keyid"]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as browser:
        await sign_in(browser, await project.token("report.read"))
        page = await browser.get(f"/reports/{report['report_id']}")
        assert page.status_code == 200
        assert keyid in page.text and "the active key of this service" in page.text
        download = await browser.get(f"/reports/{report['report_id']}/attestation")
        assert download.status_code == 200 and download.content == signed
        assert download.headers["content-type"] == ENVELOPE_MEDIA_TYPE
        assert "attachment" in download.headers["content-disposition"]
        await sign_in(browser, await other_project.token("report.read"))
        assert (await browser.get(f"/reports/{report['report_id']}/attestation")).status_code == 404
