"""The service verifies everything it can prove: what the owner tries is refused by triggers
and what the service's login tries by its grants; tampering by a superuser with triggers off
is found by `verify` and by the sweep, opens an incident naming the part that failed, flags
reads and drops the report from `forSubject`, in this process and in another one serving the
same database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
import rfc8785
from fastapi import FastAPI

from app.digest.canonical import digest_of_bytes
from app.platform.config import Settings, to_plain_url
from app.platform.metrics import Metrics
from app.workers.sweep import sweep_once
from tests.conftest import Project, free_port, wait_ready
from tests.factories import finished, first_report, problem

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

Tamper = Callable[[str, dict[str, Any], dict[str, Any]], Awaitable[None]]


async def as_owner(database_url: str, *statements: tuple[str, tuple[Any, ...]]) -> None:
    """Statements as the database owner, triggers on (they guard reports, not cases)."""
    connection = await asyncpg.connect(to_plain_url(database_url))
    try:
        async with connection.transaction():
            for statement, args in statements:
                await connection.execute(statement, *args)
    finally:
        await connection.close()


async def as_superuser(database_url: str, *statements: tuple[str, tuple[Any, ...]]) -> None:
    """Statements as a superuser with triggers off (`session_replication_role = replica`)."""
    connection = await asyncpg.connect(to_plain_url(database_url))
    try:
        async with connection.transaction():
            await connection.execute("SET LOCAL session_replication_role = replica")
            for statement, args in statements:
                await connection.execute(statement, *args)
    finally:
        await connection.close()


async def update_an_accuracy_case(
    url: str, report: dict[str, Any], assignment: str, example_id: str
) -> None:
    """`UPDATE cases SET <assignment>` on one case of the check `accuracy`, triggers off."""
    evaluation = uuid.UUID(report["body"]["evaluation_id"])
    await as_superuser(
        url,
        (
            f"UPDATE cases SET {assignment} WHERE evaluation_id = $1"
            f" AND check_id = 'accuracy' AND example_id = '{example_id}'",
            (evaluation,),
        ),
    )


async def flip_a_case_status(url: str, report: dict[str, Any], _: dict[str, Any]) -> None:
    flipped = "status = CASE status WHEN 'pass' THEN 'fail' ELSE 'pass' END"
    await update_an_accuracy_case(url, report, flipped, "e03")


async def rewrite_an_output(url: str, report: dict[str, Any], _: dict[str, Any]) -> None:
    await update_an_accuracy_case(url, report, """output = '{"a":999}'""", "e05")


async def rewrite_body_and_digest(url: str, report: dict[str, Any], _: dict[str, Any]) -> None:
    body = dict(report["body"])
    body["checks"] = [dict(c) for c in body["checks"]]
    body["checks"][0]["explanation"] += " Reviewed."
    data = rfc8785.dumps(body)
    await as_superuser(
        url,
        (
            "UPDATE reports SET body = $2, digest = $3 WHERE id = $1",
            (uuid.UUID(report["report_id"]), data, digest_of_bytes(data)),
        ),
    )


async def delete_the_attestation(url: str, report: dict[str, Any], _: dict[str, Any]) -> None:
    await as_superuser(
        url,
        (
            "DELETE FROM report_attestations WHERE report_id = $1",
            (uuid.UUID(report["report_id"]),),
        ),
    )


async def swap_current_and_superseded(
    url: str, report: dict[str, Any], successor: dict[str, Any]
) -> None:
    """`report` was superseded by `successor`; make it look the other way round."""
    older, newer = uuid.UUID(report["report_id"]), uuid.UUID(successor["report_id"])
    await as_superuser(
        url,
        (
            "UPDATE report_envelopes SET status = 'superseded', superseded_by = $2,"
            " superseded_at = now(), superseded_reason = 're_evaluation' WHERE report_id = $1",
            (newer, older),
        ),
        (
            "UPDATE report_envelopes SET status = 'current', superseded_by = NULL,"
            " superseded_at = NULL, superseded_reason = NULL WHERE report_id = $1",
            (older,),
        ),
    )


TAMPERS: list[tuple[str, Tamper, str, str]] = [
    ("a case's status", flip_a_case_status, "cases", "cases_mismatch"),
    ("an inline output", rewrite_an_output, "outputs", "output_mismatch"),
    ("body and digest together", rewrite_body_and_digest, "attestation", "attestation_mismatch"),
    ("the attestation deleted", delete_the_attestation, "attestation", "attestation_mismatch"),
    (
        "current and superseded swapped",
        swap_current_and_superseded,
        "envelope",
        "envelope_mismatch",
    ),
]


@pytest.mark.parametrize(("name", "tamper", "part", "kind"), TAMPERS, ids=[t[0] for t in TAMPERS])
async def test_each_tamper_is_found_by_the_sweep_and_by_verify(
    project: Project,
    client: httpx.AsyncClient,
    db: Any,
    settings: Settings,
    database_url: str,
    name: str,
    tamper: Tamper,
    part: str,
    kind: str,
) -> None:
    headers, report = await first_report(project, client)
    successor = await finished(client, headers)
    rid = report["report_id"]
    clean = await client.post(
        "/evaluations/api/reports/verify", json={"report_id": rid}, headers=headers
    )
    assert clean.json()["verified"] is True and clean.json()["failed"] == [], clean.json()
    await tamper(database_url, report, successor)

    every_report = settings.model_copy(
        update={"verify_sweep_every_hours": 1e-9, "verify_sweep_batch": 100_000}
    )
    swept = await sweep_once(db, every_report, Metrics())
    assert swept.swept and swept.failed >= 1
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    (incident,) = [i for i in health["open_incidents"] if i["report_id"] == rid]
    assert incident["kind"] == kind, incident
    answer = (
        await client.post(
            "/evaluations/api/reports/verify", json={"report_id": rid}, headers=headers
        )
    ).json()
    assert answer["verified"] is False and part in answer["failed"], answer
    assert any(f.startswith(part + ":") for f in answer["findings"]), answer
    served = (await client.get(f"/evaluations/api/reports/{rid}", headers=headers)).json()
    assert served["envelope"]["integrity"] == "incident"
    digest = report["body"]["subject"]["digest"]
    listed = await client.get(
        "/evaluations/api/reports/forSubject", params={"digest": digest}, headers=headers
    )
    assert rid not in [r["report_id"] for r in listed.json()["reports"]]
    if part == "envelope":
        # The swapped successor claims a supersession nobody signed.
        other = (
            await client.post(
                "/evaluations/api/reports/verify",
                json={"report_id": successor["report_id"]},
                headers=headers,
            )
        ).json()
        assert other["verified"] is False and other["failed"] == ["envelope"], other
        assert listed.json()["reports"] == []


async def test_another_process_flags_and_excludes_what_the_sweep_found(
    project: Project,
    client: httpx.AsyncClient,
    db: Any,
    settings: Settings,
    database_url: str,
    tmp_path: Path,
    key_env: dict[str, str],
) -> None:
    headers, report = await first_report(project, client)
    await flip_a_case_status(database_url, report, {})
    every_report = settings.model_copy(
        update={"verify_sweep_every_hours": 1e-9, "verify_sweep_batch": 100_000}
    )
    await sweep_once(db, every_report, Metrics())
    port = free_port()
    env = {
        **os.environ,
        "EVALBOOK_DATABASE_URL": settings.database_url,
        "EVALBOOK_DATA_DIR": str(tmp_path),
        **key_env,
        "EVALBOOK_VERIFY_SWEEP_ENABLED": "false",
        "EVALBOOK_NOTIFICATIONS_ENABLED": "false",
        # The service's own login, as the shared app runs; the owner migrated already.
        "EVALBOOK_MIGRATE_ON_START": "false",
    }
    with (tmp_path / "service.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "app.cli.main",
            "serve",
            "--port",
            str(port),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        try:
            # In a thread: this test's event loop must go on running its own app (whose log
            # cutter may be inside a transaction) while the other process starts.
            await asyncio.to_thread(wait_ready, base)
        except AssertionError:
            raise AssertionError((tmp_path / "service.log").read_text()[-3000:]) from None
        async with httpx.AsyncClient(base_url=base, headers=headers) as other:
            served = (await other.get(f"/evaluations/api/reports/{report['report_id']}")).json()
            assert served["envelope"]["integrity"] == "incident"
            listed = await other.get(
                "/evaluations/api/reports/forSubject",
                params={"digest": report["body"]["subject"]["digest"]},
            )
            assert listed.status_code == 200
            assert report["report_id"] not in [r["report_id"] for r in listed.json()["reports"]]
            health = (await other.get("/evaluations/api/health/evaluator")).json()
            assert any(
                i["report_id"] == report["report_id"] and i["kind"] == "cases_mismatch"
                for i in health["open_incidents"]
            )
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 15)


def test_findings_render_as_part_and_detail() -> None:
    from app.services.case_integrity import Finding

    assert str(Finding("cases", "accuracy: changed")) == "cases: accuracy: changed"
    assert orjson.loads(orjson.dumps({"x": str(Finding("a", "b"))})) == {"x": "a: b"}


@pytest.mark.parametrize(
    ("tamper", "example", "part"),
    [(flip_a_case_status, "e03", "cases"), (rewrite_an_output, "e05", "outputs")],
)
async def test_the_proof_endpoint_and_the_export_refuse_what_no_longer_matches(
    project: Project,
    client: httpx.AsyncClient,
    database_url: str,
    tamper: Tamper,
    example: str,
    part: str,
) -> None:
    headers, report = await first_report(project, client)
    rid = report["report_id"]
    proofs = f"/evaluations/api/reports/{rid}/cases/accuracy"
    assert (await client.get(f"{proofs}/{example}/0", headers=headers)).status_code == 200
    await tamper(database_url, report, {})
    refused = problem(await client.get(f"{proofs}/{example}/0", headers=headers), 409)
    assert refused["type"].endswith("/integrity") and f"accuracy/{example}/0" in refused["detail"]
    # An untouched case still proves.
    assert (await client.get(f"{proofs}/e00/0", headers=headers)).status_code == 200
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    (incident,) = [i for i in health["open_incidents"] if i["report_id"] == rid]
    assert incident["detail"].startswith(part + ":")
    served = (await client.get(f"/evaluations/api/reports/{rid}", headers=headers)).json()
    assert served["envelope"]["integrity"] == "incident"

    before = (await client.get("/evaluations/api/reports/bundles", headers=headers)).json()
    export = problem(
        await client.post(
            "/evaluations/api/reports/bundle", json={"report_id": rid}, headers=headers
        ),
        409,
    )
    assert export["type"].endswith("/integrity") and part in export["detail"]
    after = (await client.get("/evaluations/api/reports/bundles", headers=headers)).json()
    assert after == before


async def rewrite_a_stored_leaf(url: str, report: dict[str, Any], _: dict[str, Any]) -> None:
    await update_an_accuracy_case(url, report, "leaf = sha256(leaf)", "e09")


@pytest.mark.parametrize(
    ("tamper", "case_limit", "part"),
    [
        (flip_a_case_status, 20_000, "cases"),
        (rewrite_an_output, 20_000, "outputs"),
        # Eight of accuracy's twelve cases are written: the tampered ones among them are
        # proved through the consistency proof to the bound root.
        (flip_a_case_status, 8, "cases"),
        (rewrite_an_output, 8, "outputs"),
        # A stored leaf of a case left out: the tree the proof comes from no longer matches.
        (rewrite_a_stored_leaf, 8, "cases"),
    ],
)
async def test_an_export_proves_the_cases_it_writes_and_refuses_what_fails(
    project: Project,
    client: httpx.AsyncClient,
    app: FastAPI,
    database_url: str,
    tamper: Tamper,
    case_limit: int,
    part: str,
) -> None:
    """Nothing found the tampering before: the export finds it in the lines it writes (one
    pass over the rows), opens the incident, sends nothing, and later exports refuse too."""
    headers, report = await first_report(project, client)
    rid = report["report_id"]
    await tamper(database_url, report, {})
    before = (await client.get("/evaluations/api/reports/bundles", headers=headers)).json()
    app.state.resources.settings.bundle_case_limit = case_limit
    try:
        export = problem(
            await client.post(
                "/evaluations/api/reports/bundle", json={"report_id": rid}, headers=headers
            ),
            409,
        )
    finally:
        app.state.resources.settings.bundle_case_limit = 20_000
    assert export["type"].endswith("/integrity")
    assert f"{part}: accuracy" in export["detail"], export["detail"]
    after = (await client.get("/evaluations/api/reports/bundles", headers=headers)).json()
    assert after == before
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    (incident,) = [i for i in health["open_incidents"] if i["report_id"] == rid]
    assert incident["detail"].startswith(part + ":")
    again = problem(
        await client.post(
            "/evaluations/api/reports/bundle", json={"report_id": rid}, headers=headers
        ),
        409,
    )
    assert "open incident" in again["detail"] and part in again["detail"]


# Changes of issued data ($1: the report's evaluation, $2: its project), each refused.
FROZEN = [
    "UPDATE cases SET status = 'fail' WHERE evaluation_id = $1",
    """UPDATE cases SET output = '{"a":1}' WHERE evaluation_id = $1 AND output IS NOT NULL""",
    "UPDATE cases SET created_at = now() WHERE evaluation_id = $1",
    "DELETE FROM cases WHERE evaluation_id = $1",
    "UPDATE examples SET body_digest = 'sha256:0' WHERE dataset_version_id IN"
    " (SELECT id FROM dataset_versions WHERE project_id = $2)",
    "DELETE FROM examples WHERE dataset_version_id IN"
    " (SELECT id FROM dataset_versions WHERE project_id = $2)",
    "UPDATE dataset_versions SET digest = 'sha256:0' WHERE project_id = $2",
    "UPDATE scorer_versions SET version = version || 'x' WHERE project_id = $2",
    "UPDATE suite_versions SET digest = 'sha256:0' WHERE suite_id IN"
    " (SELECT id FROM suites WHERE project_id = $2)",
    "UPDATE suites SET name = name || 'x' WHERE project_id = $2",
    "UPDATE api_tokens SET permissions = ARRAY['report.read'] WHERE project_id = $2",
    "DELETE FROM api_tokens WHERE project_id = $2",
    "UPDATE evaluations SET subject_digest = 'sha1:0' WHERE id = $1",
    "UPDATE bundles SET digest = 'sha256:0' WHERE project_id = $2",
]


async def test_issued_data_is_frozen_for_the_owner_and_the_service_login(
    project: Project, client: httpx.AsyncClient, settings: Settings, database_url: str
) -> None:
    headers, report = await first_report(project, client)
    exported = await client.post(
        "/evaluations/api/reports/bundle", json={"report_id": report["report_id"]}, headers=headers
    )
    assert exported.status_code == 201, exported.text
    evaluation = uuid.UUID(report["body"]["evaluation_id"])
    for url, refusal in (
        (database_url, "frozen|append-only"),
        (settings.database_url, "permission denied|frozen"),
    ):
        connection = await asyncpg.connect(to_plain_url(url))
        try:
            for statement in FROZEN:
                with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError, match=refusal):
                    async with connection.transaction():
                        await connection.execute(
                            statement.replace("$1", f"'{evaluation}'").replace(
                                "$2", f"'{project.id}'"
                            )
                        )
            for table in ("cases", "examples", "api_tokens", "bundles", "suite_versions"):
                with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError):
                    await connection.execute(f"TRUNCATE {table} CASCADE")
        finally:
            await connection.close()
    # What retention and revocation do stays possible, once.
    service = await asyncpg.connect(to_plain_url(settings.database_url))
    try:
        revoked = await service.execute(
            "UPDATE api_tokens SET revoked_at = now() WHERE project_id = $1 AND name = 'spare'",
            project.id,
        )
        assert revoked == "UPDATE 0"
        await project.token("report.read")
        done = await service.execute(
            "UPDATE api_tokens SET revoked_at = now()"
            " WHERE project_id = $1 AND permissions = ARRAY['report.read'] AND revoked_at IS NULL",
            project.id,
        )
        assert done.startswith("UPDATE") and done != "UPDATE 0"
        with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError, match="frozen"):
            await service.execute(
                "UPDATE api_tokens SET revoked_at = now() WHERE project_id = $1"
                " AND revoked_at IS NOT NULL",
                project.id,
            )
        cleared = await service.execute(
            "UPDATE cases SET output = NULL, output_removed_at = now()"
            " WHERE evaluation_id = $1 AND example_id = 'e00'",
            evaluation,
        )
        assert cleared != "UPDATE 0"
    finally:
        await service.close()


async def test_large_checks_stream_in_batches_and_are_still_proven(
    project: Project,
    client: httpx.AsyncClient,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checks past the one-round-trip size are read in batches hashed in a worker thread
    (here batches of 5 for the report's 12 cases a check)."""
    from app.services import case_integrity

    monkeypatch.setattr(case_integrity, "ROWS_PER_BATCH", 5)
    headers, report = await first_report(project, client)
    rid = report["report_id"]
    verify = "/evaluations/api/reports/verify"
    clean = (await client.post(verify, json={"report_id": rid}, headers=headers)).json()
    assert clean["verified"] is True, clean
    await flip_a_case_status(database_url, report, {})
    tampered = (await client.post(verify, json={"report_id": rid}, headers=headers)).json()
    assert tampered["failed"] == ["cases"], tampered
