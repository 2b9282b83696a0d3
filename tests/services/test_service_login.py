"""The database login the service runs as cannot create trust (docs/transparency.md, "What the
service's login cannot do"): it cannot add or retire signing keys, write log entries,
checkpoints or log keys except through the owner's functions (which compute them from stored
rows and refuse anything else), resolve incidents outside the audited function, or rewrite a
verification. Each attempt is made here as that login, against the real database."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import asyncpg
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.digest.signing import envelope, keyid_of, raw_public, report_statement
from app.platform.config import Settings, to_plain_url
from tests.conftest import Project
from tests.factories import first_report

# Depends on the server's own grants and functions: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


async def as_login(url: str, statement: str, *args: Any) -> Any:
    """One statement as `url`'s login, in a transaction of its own; its first value."""
    connection = await asyncpg.connect(to_plain_url(url))
    try:
        async with connection.transaction():
            return await connection.fetchval(statement, *args)
    finally:
        await connection.close()


async def refused(url: str, statement: str, *args: Any) -> asyncpg.PostgresError:
    """The error the database answers `statement` with (the test fails when it runs)."""
    with pytest.raises(asyncpg.PostgresError) as caught:
        await as_login(url, statement, *args)
    return caught.value


async def test_the_service_login_cannot_write_keys_entries_checkpoints_or_resolutions(
    project: Project, client: Any, settings: Settings, database_url: str
) -> None:
    _, report = await first_report(project, client)
    service = settings.database_url
    assert service is not None
    outsider = Ed25519PrivateKey.generate()
    keyid = keyid_of(outsider.public_key())
    public = raw_public(outsider.public_key())
    denied = [
        (
            "INSERT INTO signing_keys (keyid, public_key, status, created_at, retired_at)"
            " VALUES ($1, $2, 'retired', now() - interval '1 day', now())",
            keyid,
            public,
        ),
        ("UPDATE signing_keys SET status = 'retired', retired_at = now()",),
        (
            "INSERT INTO log_entries (idx, kind, report_id, entry, leaf)"
            " VALUES (1000000, 'report', $1, 'x', $2)",
            uuid.uuid4(),
            b"\0" * 32,
        ),
        ("INSERT INTO log_checkpoints (size, root, note) VALUES (1000000, $1, 'x')", b"\0" * 32),
        ("INSERT INTO log_keys (name, public_key) VALUES ('forger/log', $1)", public),
        ("UPDATE incidents SET resolved_at = now()",),
        ("UPDATE report_verifications SET verified = true",),
        ("DELETE FROM report_verifications",),
    ]
    for statement, *args in denied:
        error = await refused(service, statement, *args)
        assert isinstance(error, asyncpg.InsufficientPrivilegeError), (statement, error)

    # The functions compute from stored rows: a report that is not stored and signed is not
    # logged, nor is one logged twice, nor a checkpoint whose note is not over the stored tree.
    error = await refused(service, "SELECT evalbook_log_append('report', $1)", [uuid.uuid4()])
    assert "only 0 of 1 named rows can be logged" in str(error)
    error = await refused(
        service, "SELECT evalbook_log_append('report', $1)", [uuid.UUID(report["report_id"])]
    )
    assert isinstance(error, asyncpg.UniqueViolationError)
    error = await refused(service, "SELECT evalbook_log_append('note', $1)", [uuid.uuid4()])
    assert "a log entry is of a report or of a supersession" in str(error)
    size = await as_login(service, "SELECT count(*) FROM log_entries")
    junk = "forger/log\n1\nAAAA\n\n— forger/log abc\n".encode()
    for tree_size in (size + 1_000_000, size - 1, size):
        error = await refused(service, "SELECT evalbook_log_checkpoint($1, $2)", tree_size, junk)
        assert isinstance(error, asyncpg.InvalidParameterValueError | asyncpg.DataCorruptedError)
    newest = await as_login(service, "SELECT max(size) FROM log_checkpoints")
    assert newest is None or newest <= size

    # A verification row is dated by the database, never by its writer.
    await as_login(
        service,
        "INSERT INTO report_verifications (report_id, verified_at, verified)"
        " VALUES ($1, now() + interval '10 years', true)",
        uuid.UUID(report["report_id"]),
    )
    latest = await as_login(
        service,
        "SELECT max(verified_at) <= now() FROM report_verifications WHERE report_id = $1",
        uuid.UUID(report["report_id"]),
    )
    assert latest is True


async def test_a_forged_report_signed_by_an_outsider_key_is_never_logged(
    project: Project, client: Any, settings: Settings
) -> None:
    """The audit's attack: a failed report flipped to pass under a new id, stored with an
    attestation by a key the owner never registered: refused before the log is asked."""
    _, report = await first_report(project, client)
    service = settings.database_url
    assert service is not None
    original = uuid.UUID(report["report_id"])
    forged_id, evaluation_id = uuid.uuid4(), uuid.uuid4()
    outsider = Ed25519PrivateKey.generate()
    body = dict(report["body"])
    body["result"] = "pass"
    body["report_id"] = str(forged_id)
    data = rfc8785.dumps(body)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    signed = envelope(report_statement(data, str(forged_id), digest, body["subject"]), outsider)
    connection = await asyncpg.connect(to_plain_url(service))
    try:
        transaction = connection.transaction()
        await transaction.start()
        # The login may store rows like the ones it issues (it issues reports)...
        await connection.execute(
            "INSERT INTO evaluations SELECT (jsonb_populate_record(NULL::evaluations,"
            " to_jsonb(e) || jsonb_build_object('id', $2::text))).* FROM evaluations e"
            " WHERE e.id = (SELECT evaluation_id FROM reports WHERE id = $1)",
            original,
            str(evaluation_id),
        )
        await connection.execute(
            "INSERT INTO reports SELECT (jsonb_populate_record(NULL::reports, to_jsonb(r)"
            " || jsonb_build_object('id', $2::text, 'evaluation_id', $3::text,"
            " 'result', 'pass', 'digest', $4::text,"
            " 'body', '\\x' || encode($5::bytea, 'hex')))).* FROM reports r WHERE r.id = $1",
            original,
            str(forged_id),
            str(evaluation_id),
            digest,
            data,
        )
        # ... but not an attestation by a key the owner never registered (and it may not
        # register one: the test above), so there is nothing the log would take.
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await connection.execute(
                "INSERT INTO report_attestations (report_id, keyid, envelope, digest)"
                " VALUES ($1, $2, $3, $4)",
                forged_id,
                keyid_of(outsider.public_key()),
                signed,
                "sha256:" + hashlib.sha256(signed).hexdigest(),
            )
        await transaction.rollback()
        # Nor, without one, does the log take the report.
        error = await refused(service, "SELECT evalbook_log_append('report', $1)", [forged_id])
        assert "only 0 of 1 named rows can be logged" in str(error)
    finally:
        await connection.close()


async def test_the_entries_the_database_computes_are_rfc8785_and_name_the_stored_rows(
    project: Project, client: Any, settings: Settings
) -> None:
    """The definer function writes each entry itself: RFC 8785 as the reference implementation
    writes it, naming the report's digest, attestation digest, subject and suite as stored."""
    _, report = await first_report(project, client)
    service = settings.database_url
    assert service is not None
    connection = await asyncpg.connect(to_plain_url(service))
    try:
        rows = await connection.fetch("SELECT kind, report_id, entry FROM log_entries")
        attestation = await connection.fetchval(
            "SELECT digest FROM report_attestations WHERE report_id = $1",
            uuid.UUID(report["report_id"]),
        )
    finally:
        await connection.close()
    for row in rows:
        entry = bytes(row["entry"])
        assert rfc8785.dumps(json.loads(entry)) == entry, entry
    (mine,) = [json.loads(r["entry"]) for r in rows if str(r["report_id"]) == report["report_id"]]
    suite = report["body"]["suite_ref"]
    assert mine == {
        "kind": "report",
        "report_id": report["report_id"],
        "report_digest": report["digest"],
        "attestation_digest": attestation,
        "subject_digest": mine["subject_digest"],
        "suite": {"id": suite["id"], "version": suite["version"], "digest": suite["digest"]},
        "issued_at": report["body"]["issued_at"],
    }
    assert mine["subject_digest"] == report["body"]["subject"]["digest"]
