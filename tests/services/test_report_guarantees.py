"""What the database guarantees about reports, raced and tampered with for real."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import func, select, text

from app.models import CheckResult, Report, ReportEnvelope
from app.platform.config import to_plain_url
from tests.conftest import Project
from tests.factories import (
    behind_the_triggers,
    define_suite,
    finished,
    first_report,
    problem,
    run_cases,
    start_evaluation,
    suite_body,
)

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

SUBJECT = {"digest": "sha1:0123456789abcdef0123456789abcdef01234567", "repo": "acme/web"}


async def test_concurrent_finishes_issue_one_report(
    project: Project, client: httpx.AsyncClient, db
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    await run_cases(client, headers, evaluation["evaluation_id"])
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}/finish"
    responses = await asyncio.gather(*(client.post(url, headers=headers) for _ in range(20)))
    assert sorted(r.status_code for r in responses) == [200] * 19 + [201]
    assert len({r.json()["report_id"] for r in responses}) == 1
    async with db() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(Report)
            .where(Report.evaluation_id == uuid.UUID(evaluation["evaluation_id"]))
        )
    assert count == 1


async def test_concurrent_evaluations_of_one_subject_leave_one_current(
    project: Project, client: httpx.AsyncClient, db
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluations = [await start_evaluation(client, headers) for _ in range(20)]
    for evaluation in evaluations:
        await run_cases(client, headers, evaluation["evaluation_id"])
    responses = await asyncio.gather(
        *(
            client.post(f"/api/v1/evaluations/{e['evaluation_id']}/finish", headers=headers)
            for e in evaluations
        )
    )
    assert {r.status_code for r in responses} == {201}
    async with db() as session:
        rows = (
            await session.execute(
                select(
                    Report.id, Report.issued_at, ReportEnvelope.status, ReportEnvelope.superseded_by
                )
                .join(ReportEnvelope, ReportEnvelope.report_id == Report.id)
                .where(Report.project_id == project.id)
            )
        ).all()
    current = [r for r in rows if r.status == "current"]
    assert len(current) == 1
    last = max(rows, key=lambda r: r.issued_at)
    assert current[0].id == last.id
    successor = {r.id: r.superseded_by for r in rows}
    for row in rows:
        seen, at = set(), row.id
        while successor[at] is not None:
            assert at not in seen
            seen.add(at)
            at = successor[at]
        assert at == last.id
    listed = await client.get(
        "/evaluations/api/reports/forSubject", params={"digest": SUBJECT["digest"]}, headers=headers
    )
    assert [r["report_id"] for r in listed.json()["reports"]] == [str(last.id)]


async def test_failure_before_commit_leaves_nothing(
    project: Project, client: httpx.AsyncClient, db, app
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    evaluation = await start_evaluation(client, headers)
    await run_cases(client, headers, evaluation["evaluation_id"])
    eid = evaluation["evaluation_id"]
    # The evaluation's status is the last thing finish writes: fail it at the database.
    async with db() as session, session.begin():
        await session.execute(
            text(
                "CREATE FUNCTION test_fail_finish() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF NEW.id = '{eid}' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$"
            )
        )
        await session.execute(
            text(
                "CREATE TRIGGER test_fail_finish BEFORE UPDATE ON evaluations FOR EACH ROW "
                "EXECUTE FUNCTION test_fail_finish()"
            )
        )
    try:
        # Starlette re-raises after answering 500; take the answer as a real server would send it.
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as raw:
            failed = await raw.post(f"/api/v1/evaluations/{eid}/finish", headers=headers)
        problem(failed, 500)
    finally:
        async with db() as session, session.begin():
            await session.execute(text("DROP TRIGGER test_fail_finish ON evaluations"))
            await session.execute(text("DROP FUNCTION test_fail_finish()"))
    async with db() as session:
        reports = await session.scalar(
            select(func.count()).select_from(Report).where(Report.evaluation_id == uuid.UUID(eid))
        )
        checks = await session.scalar(
            select(func.count())
            .select_from(CheckResult)
            .join(Report, Report.id == CheckResult.report_id)
            .where(Report.evaluation_id == uuid.UUID(eid))
        )
        envelopes = await session.scalar(
            select(func.count())
            .select_from(ReportEnvelope)
            .where(ReportEnvelope.project_id == project.id)
        )
    assert (reports, checks, envelopes) == (0, 0, 0)
    assert (await client.get(f"/api/v1/evaluations/{eid}", headers=headers)).json()[
        "status"
    ] == "running"
    retried = await client.post(f"/api/v1/evaluations/{eid}/finish", headers=headers)
    assert retried.status_code == 201


async def test_reports_are_append_only_and_tampering_is_caught(
    project: Project, client: httpx.AsyncClient, database_url: str
) -> None:
    headers, report = await first_report(project, client)
    rid = uuid.UUID(report["report_id"])
    connection = await asyncpg.connect(to_plain_url(database_url))
    try:
        for statement in (
            "UPDATE reports SET digest = 'x' WHERE id = $1",
            "UPDATE reports SET body = 'x' WHERE id = $1",
            "DELETE FROM reports WHERE id = $1",
        ):
            with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError):
                await connection.execute(statement, rid)
        with pytest.raises(asyncpg.exceptions.InsufficientPrivilegeError):
            await connection.execute("TRUNCATE reports CASCADE")
        # A superuser can go around the triggers; verification must notice.
        async with connection.transaction():
            await connection.execute("SET LOCAL session_replication_role = replica")
            await connection.execute(
                "UPDATE reports SET body = convert_to(replace(convert_from(body, 'UTF8'),"
                ' \'"result":"pass"\', \'"result":"fail"\'), \'UTF8\') WHERE id = $1',
                rid,
            )
            assert b'"result":"fail"' in await connection.fetchval(
                "SELECT body FROM reports WHERE id = $1", rid
            )
    finally:
        await connection.close()
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    assert health == {"status": "ok", "open_incidents": []}
    verified = await client.post(
        "/evaluations/api/reports/verify", json={"report_id": str(rid)}, headers=headers
    )
    assert verified.status_code == 200
    answer = verified.json()
    assert answer["verified"] is False and answer["stored_digest"] == report["digest"]
    assert answer["computed_digest"] != report["digest"]
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    assert health["status"] == "incidents"
    assert [i["report_id"] for i in health["open_incidents"]] == [str(rid)]
    await client.post(
        "/evaluations/api/reports/verify", json={"report_id": str(rid)}, headers=headers
    )
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    assert len(health["open_incidents"]) == 1
    metrics = (await client.get("/metrics")).text
    gauge = next(
        line for line in metrics.splitlines() if line.startswith("evalbook_open_incidents ")
    )
    assert float(gauge.split()[1]) >= 1


async def test_activation_supersedes_still_valid_gate_reports_of_the_replaced_version(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    short = {**suite_body(), "validity_hours": 0.001}
    await define_suite(client, headers, body=short)
    expired = await finished(client, headers, subject={"digest": "sha1:" + "1" * 40})
    await asyncio.sleep(3.8)
    valid = await finished(client, headers, subject={"digest": "sha1:" + "2" * 40})
    experiment = await finished(
        client, headers, subject={"digest": "sha1:" + "2" * 40}, mode="experiment"
    )
    exploratory = await finished(
        client, headers, subject={"digest": "sha1:" + "3" * 40}, mode="exploratory"
    )
    started = time.monotonic()
    await client.put("/api/v1/suites/rag/versions/2", json=suite_body(), headers=headers)
    activated = await client.post("/api/v1/suites/rag/versions/2/activate", headers=headers)
    assert time.monotonic() - started < 3.0, "the valid report must still be valid when activated"
    assert activated.json()["superseded_report_ids"] == [valid["report_id"]]
    got = (
        await client.get(f"/evaluations/api/reports/{valid['report_id']}", headers=headers)
    ).json()
    assert got["envelope"]["status"] == "superseded"
    assert got["envelope"]["superseded_reason"] == "suite_version_activated"
    assert got["envelope"]["superseded_by"] is None
    for other in (expired, experiment, exploratory):
        envelope = (
            await client.get(f"/evaluations/api/reports/{other['report_id']}", headers=headers)
        ).json()["envelope"]
        assert envelope["status"] == "current"
    assert (
        await client.get(f"/evaluations/api/reports/{expired['report_id']}", headers=headers)
    ).json()["envelope"]["expired"] is True
    again = await client.post("/api/v1/suites/rag/versions/2/activate", headers=headers)
    assert again.json()["superseded_report_ids"] == []


async def test_experiments_never_supersede_and_expired_reports_are_flagged(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body={**suite_body(), "validity_hours": 0.001})
    gate = await finished(client, headers)
    experiment = await finished(client, headers, mode="experiment")
    assert experiment["envelope"]["status"] == "current"
    gate_now = (
        await client.get(f"/evaluations/api/reports/{gate['report_id']}", headers=headers)
    ).json()
    assert gate_now["envelope"]["status"] == "current"
    listed = await client.get(
        "/evaluations/api/reports/forSubject", params={"digest": SUBJECT["digest"]}, headers=headers
    )
    assert [r["report_id"] for r in listed.json()["reports"]] == [gate["report_id"]]
    await asyncio.sleep(3.7)
    assert (
        await client.get(
            "/evaluations/api/reports/forSubject",
            params={"digest": SUBJECT["digest"]},
            headers=headers,
        )
    ).json()["reports"] == []
    expired = await client.get(
        "/evaluations/api/reports/forSubject",
        params={"digest": SUBJECT["digest"], "include_expired": "true"},
        headers=headers,
    )
    (only,) = expired.json()["reports"]
    assert only["report_id"] == gate["report_id"] and only["envelope"]["expired"] is True


async def test_list_filters_and_a_cursor_stable_under_inserts(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    made = [await finished(client, headers, subject={"digest": f"sha1:{i:040x}"}) for i in range(5)]
    newest_first = [r["report_id"] for r in reversed(made)]
    page = (
        await client.get("/evaluations/api/reports", params={"limit": 2}, headers=headers)
    ).json()
    assert [r["report_id"] for r in page["reports"]] == newest_first[:2]
    await finished(client, headers, subject={"digest": "sha1:" + "f" * 40})
    seen = [r["report_id"] for r in page["reports"]]
    cursor = page["next_cursor"]
    while cursor:
        answer = await client.get(
            "/evaluations/api/reports", params={"limit": 2, "cursor": cursor}, headers=headers
        )
        assert answer.status_code == 200, answer.text
        page = answer.json()
        seen += [r["report_id"] for r in page["reports"]]
        cursor = page["next_cursor"]
    assert seen == newest_first
    by_subject = await client.get(
        "/evaluations/api/reports", params={"subject_digest": f"sha1:{3:040x}"}, headers=headers
    )
    assert [r["report_id"] for r in by_subject.json()["reports"]] == [made[3]["report_id"]]
    for params, count in (
        ({"suite": "rag"}, 6),
        ({"suite": "nope"}, 0),
        ({"result": "pass"}, 6),
        ({"result": "fail"}, 0),
        ({"status": "superseded"}, 0),
        ({"mode": "experiment"}, 0),
    ):
        listed = await client.get("/evaluations/api/reports", params=params, headers=headers)
        assert len(listed.json()["reports"]) == count, params
    for cursor in ("garbage!", f"{10**15}.{uuid.uuid4().hex}", f"1.{'0' * 32}.{'0' * 16}"):
        problem(
            await client.get(
                "/evaluations/api/reports", params={"cursor": cursor}, headers=headers
            ),
            400,
        )
    problem(
        await client.get("/evaluations/api/reports", params={"limit": 201}, headers=headers), 422
    )
    problem(
        await client.get("/evaluations/api/reports", params={"result": "great"}, headers=headers),
        422,
    )


async def test_status_lists_page_through_envelopes_newest_first(
    project: Project, client: httpx.AsyncClient
) -> None:
    """Lists filtered by status (read from the envelopes' indexes) hold exactly the reports of
    that status, newest first, through every page, alone and with the suite and mode."""
    headers = await project.admin()
    await define_suite(client, headers)
    made = []
    for i in (0, 1, 0, 2, 1, 0):
        made.append(await finished(client, headers, subject={"digest": f"sha1:{i:040x}"}))
    everything = (
        await client.get("/evaluations/api/reports", params={"limit": 200}, headers=headers)
    ).json()["reports"]
    assert [r["report_id"] for r in everything] == [r["report_id"] for r in reversed(made)]

    async def paged(params: dict[str, Any]) -> list[str]:
        seen: list[str] = []
        cursor = None
        while True:
            query = {**params, "limit": 2, **({"cursor": cursor} if cursor else {})}
            answer = await client.get("/evaluations/api/reports", params=query, headers=headers)
            assert answer.status_code == 200, answer.text
            page = answer.json()
            seen += [r["report_id"] for r in page["reports"]]
            cursor = page["next_cursor"]
            if not cursor:
                return seen

    for status, count in (("current", 3), ("superseded", 3)):
        expected = [r["report_id"] for r in everything if r["envelope"]["status"] == status]
        assert len(expected) == count
        assert await paged({"status": status}) == expected
        assert await paged({"status": status, "suite": "rag"}) == expected
        assert await paged({"status": status, "suite": "rag", "mode": "gate"}) == expected
        assert await paged({"status": status, "result": "pass"}) == expected
        assert await paged({"status": status, "suite": "nope"}) == []
        assert await paged({"status": status, "mode": "experiment"}) == []


async def test_a_summary_list_is_the_full_list_without_bodies(
    project: Project, other_project: Project, client: httpx.AsyncClient
) -> None:
    """`view=summary`: the same reports, pages and cursors, each with its list fields and
    envelope but no body; refused like the full list."""
    headers = await project.admin()
    await define_suite(client, headers)
    for i in range(3):
        await finished(client, headers, subject={"digest": f"sha1:{i:040x}"})
    full = (await client.get("/evaluations/api/reports", headers=headers)).json()["reports"]
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"view": "summary", "limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        answer = await client.get("/evaluations/api/reports", params=params, headers=headers)
        assert answer.status_code == 200, answer.text
        seen += answer.json()["reports"]
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(full) == 3
    for item, report in zip(seen, full, strict=True):
        body = report["body"]
        assert "body" not in item
        assert item == {
            "report_id": report["report_id"],
            "digest": report["digest"],
            "issued_at": body["issued_at"],
            "result": body["result"],
            "subject_digest": body["subject"]["digest"],
            "mode": body["mode"],
            "valid_until": body["valid_until"],
            "envelope": report["envelope"],
        }
    by_subject = await client.get(
        "/evaluations/api/reports",
        params={"view": "summary", "subject_digest": f"sha1:{1:040x}"},
        headers=headers,
    )
    assert [r["report_id"] for r in by_subject.json()["reports"]] == [full[1]["report_id"]]
    problem(
        await client.get("/evaluations/api/reports", params={"view": "brief"}, headers=headers),
        422,
    )
    elsewhere = await client.get(
        "/evaluations/api/reports", params={"view": "summary"}, headers=await other_project.admin()
    )
    assert elsewhere.json() == {"reports": [], "next_cursor": None}
    reader_without_permission = await project.token("evaluation.write")
    problem(
        await client.get(
            "/evaluations/api/reports",
            params={"view": "summary"},
            headers={"Authorization": f"Bearer {reader_without_permission}"},
        ),
        403,
    )


async def test_what_a_report_was_issued_with_cannot_be_rewritten(
    project: Project, client: httpx.AsyncClient, database_url: str
) -> None:
    """Check results and manifests are append-only; an envelope only goes from current to
    superseded, once, setting its supersession fields once. Refused by PostgreSQL itself,
    even for a superuser that does not switch the triggers off."""
    headers = await project.admin()
    await define_suite(client, headers)
    first = await finished(client, headers)
    second = await finished(client, headers)
    rid, successor = uuid.UUID(first["report_id"]), uuid.UUID(second["report_id"])
    connection = await asyncpg.connect(to_plain_url(database_url))
    refused = asyncpg.exceptions.InsufficientPrivilegeError
    try:
        assert (
            await connection.fetchval(
                "SELECT status FROM report_envelopes WHERE report_id = $1", rid
            )
            == "superseded"
        )
        for statement in (
            "UPDATE check_results SET status = 'fail' WHERE report_id = $1",
            "DELETE FROM check_results WHERE report_id = $1",
            "UPDATE report_envelopes SET status = 'current', superseded_by = NULL,"
            " superseded_at = NULL, superseded_reason = NULL WHERE report_id = $1",
            "UPDATE report_envelopes SET superseded_at = now() WHERE report_id = $1",
            "DELETE FROM report_envelopes WHERE report_id = $1",
        ):
            with pytest.raises(refused):
                await connection.execute(statement, rid)
        for statement in (
            "UPDATE report_envelopes SET expires_at = expires_at + interval '1 year'"
            " WHERE report_id = $1",
            "UPDATE report_envelopes SET status = 'superseded' WHERE report_id = $1",
            "UPDATE report_envelopes SET status = 'superseded', superseded_by = report_id,"
            " superseded_at = now(), superseded_reason = 're_evaluation',"
            " issued_at = issued_at - interval '1 day' WHERE report_id = $1",
        ):
            with pytest.raises(refused):
                await connection.execute(statement, successor)
        manifest_rows = await connection.fetchval("SELECT count(*) FROM evidence_manifests")
        if manifest_rows:
            with pytest.raises(refused):
                await connection.execute("UPDATE evidence_manifests SET digests = digests")
            with pytest.raises(refused):
                await connection.execute("DELETE FROM evidence_manifests")
        for table in ("check_results", "evidence_manifests", "report_envelopes"):
            with pytest.raises(refused):
                await connection.execute(f"TRUNCATE {table}")
        # The one transition the service makes is still allowed, once.
        async with connection.transaction():
            await connection.execute(
                "UPDATE report_envelopes SET status = 'superseded', superseded_at = now(),"
                " superseded_reason = 're_evaluation' WHERE report_id = $1",
                successor,
            )
            with pytest.raises(refused):
                async with connection.transaction():
                    await connection.execute(
                        "UPDATE report_envelopes SET superseded_reason = 'suite_version_activated'"
                        " WHERE report_id = $1",
                        successor,
                    )
            raise _Rollback  # leave the database as the service left it
    except _Rollback:
        pass
    finally:
        await connection.close()


class _Rollback(Exception):
    """Leaves a test transaction without committing it."""


async def test_verify_compares_every_column_derived_from_the_body(
    project: Project, client: httpx.AsyncClient, database_url: str
) -> None:
    headers, report = await first_report(project, client)
    rid = uuid.UUID(report["report_id"])
    clean = await client.post(
        "/evaluations/api/reports/verify", json={"report_id": str(rid)}, headers=headers
    )
    assert clean.json()["verified"] is True and clean.json()["mismatches"] == []
    # As a superuser can: with the triggers off, the body untouched.
    flip = "CASE WHEN result = 'pass' THEN 'fail' ELSE 'pass' END"
    await behind_the_triggers(
        database_url,
        rid,
        f"UPDATE reports SET result = {flip} WHERE id = $1",
        "UPDATE report_envelopes SET subject_digest = 'sha1:00000000' WHERE report_id = $1",
        f"UPDATE check_results SET result = {flip} WHERE report_id = $1 AND position = 0",
    )
    answer = (
        await client.post(
            "/evaluations/api/reports/verify", json={"report_id": str(rid)}, headers=headers
        )
    ).json()
    assert answer["verified"] is False
    assert answer["computed_digest"] == answer["stored_digest"] == report["digest"]
    assert "reports.result" in answer["mismatches"]
    assert "report_envelopes.subject_digest" in answer["mismatches"]
    assert "check_results" in answer["mismatches"]
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    (incident,) = [i for i in health["open_incidents"] if i["report_id"] == str(rid)]
    assert incident["kind"] == "derived_mismatch"
    assert "reports.result" in incident["detail"]


async def test_a_report_with_an_open_incident_is_flagged_and_not_offered_to_gates(
    project: Project, client: httpx.AsyncClient, database_url: str
) -> None:
    headers, report = await first_report(project, client)
    rid, digest = report["report_id"], report["body"]["subject"]["digest"]
    assert report["envelope"]["integrity"] == "ok"
    subject = f"/evaluations/api/reports/forSubject?digest={digest}"
    offered = (await client.get(subject, headers=headers)).json()["reports"]
    assert [r["report_id"] for r in offered] == [rid]
    await behind_the_triggers(
        database_url, uuid.UUID(rid), "UPDATE reports SET body = body || ' '::bytea WHERE id = $1"
    )
    await client.post("/evaluations/api/reports/verify", json={"report_id": rid}, headers=headers)
    for path in (
        f"/evaluations/api/reports/{rid}",
        f"/api/v1/evaluations/{report['body']['evaluation_id']}/report",
    ):
        served = (await client.get(path, headers=headers)).json()
        assert served["envelope"]["integrity"] == "incident", path
    listed = (await client.get("/evaluations/api/reports", headers=headers)).json()["reports"]
    assert [r["envelope"]["integrity"] for r in listed if r["report_id"] == rid] == ["incident"]
    assert (await client.get(subject, headers=headers)).json()["reports"] == []


async def test_the_service_role_may_not_rewrite_what_was_issued(
    project: Project, client: httpx.AsyncClient, service_url: str
) -> None:
    """The app under test runs as a login of the service role; PostgreSQL itself refuses it
    every UPDATE or DELETE of issued data, TRUNCATE and DDL (no trigger needed)."""
    headers = await project.admin()
    await define_suite(client, headers)
    rid = uuid.UUID((await finished(client, headers))["report_id"])
    connection = await asyncpg.connect(service_url)
    try:
        assert await connection.fetchval("SELECT current_user") != "postgres"
        denied = asyncpg.exceptions.InsufficientPrivilegeError
        for statement in (
            "UPDATE reports SET result = 'pass' WHERE id = $1",
            "DELETE FROM reports WHERE id = $1",
            "UPDATE check_results SET result = 'pass' WHERE report_id = $1",
            "DELETE FROM check_results WHERE report_id = $1",
            "DELETE FROM evidence_manifests WHERE report_id = $1",
            "DELETE FROM report_envelopes WHERE report_id = $1",
            # A case is bound to the report by its leaf: only retention's columns may change.
            "UPDATE cases SET status = 'fail' WHERE evaluation_id ="
            " (SELECT evaluation_id FROM reports WHERE id = $1)",
            "UPDATE cases SET leaf = leaf WHERE evaluation_id ="
            " (SELECT evaluation_id FROM reports WHERE id = $1)",
        ):
            with pytest.raises(denied, match="permission denied"):
                await connection.execute(statement, rid)
        for statement in (
            "TRUNCATE reports CASCADE",
            "TRUNCATE check_results",
            "CREATE TABLE mine (x int)",
            "ALTER TABLE reports DISABLE TRIGGER ALL",
            "DROP TABLE incidents",
            "SET session_replication_role = replica",
        ):
            with pytest.raises(
                (denied, asyncpg.exceptions.UndefinedTableError), match=r"denied|must be owner"
            ):
                await connection.execute(statement)
        # What the service does need still works.
        assert await connection.fetchval("SELECT count(*) FROM reports WHERE id = $1", rid) == 1
    finally:
        await connection.close()
