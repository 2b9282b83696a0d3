"""Migrations that move data: 0013 (cases partitioned, example positions, outputs apart) moves
every stored case and output, and its downgrade moves them back; 0015 copies each report's
issued_at to its envelope; each on a database of its own."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import pytest
import rfc8785
from alembic import command

from app.api.main import create_app
from app.digest.manifest_digests import document_of
from app.platform.config import Settings, to_plain_url
from app.platform.db import alembic_config, migrate
from app.services import projects
from app.services.provisioning import provision
from tests.conftest import auth
from tests.factories import case, define_suite, start_evaluation

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

CASES_WITH_OUTPUTS = """
SELECT c.evaluation_id, c.check_id, c.example_id, c.repeat, c.status, c.score, c.output_digest,
       c.scorer_version, c.assurance, c.leaf, {output} AS output
FROM cases c {join} ORDER BY 1, 2, 3, 4
"""
JOINED = "LEFT JOIN case_outputs o USING (evaluation_id, check_id, example_id, repeat)"


@pytest.fixture
async def own_database(database_url: str) -> AsyncIterator[str]:
    """A database of this test's own on the tests' server, migrated to head."""
    name = f"evalbook_migrations_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(to_plain_url(database_url))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    # The database's name is the URL's path (an embedded server's socket is in its query).
    url = urlunsplit(urlsplit(database_url)._replace(path="/" + name))
    await asyncio.to_thread(migrate, url)
    yield url
    admin = await asyncpg.connect(to_plain_url(database_url))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def _fetch(url: str, sql: str) -> list[tuple[Any, ...]]:
    connection = await asyncpg.connect(to_plain_url(url))
    try:
        return [tuple(row) for row in await connection.fetch(sql)]
    finally:
        await connection.close()


async def _execute(url: str, sql: str) -> None:
    """Statements in the simple protocol (several at once)."""
    connection = await asyncpg.connect(to_plain_url(url))
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


@asynccontextmanager
async def _serving(
    url: str, data_dir: Path, signing_key_file: Path
) -> AsyncIterator[tuple[Any, httpx.AsyncClient, dict[str, str]]]:
    """The app on `url` (its lifespan running), a client speaking ASGI to it, and an admin's
    headers in a fresh project with the factories' suite defined."""
    settings = Settings(
        database_url=url,
        data_dir=data_dir,
        signing_key_file=signing_key_file,
        notifications_enabled=False,
        verify_sweep_enabled=False,
    )
    await provision(url, settings)
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        state = application.state.resources
        async with state.sessionmaker() as session, session.begin():
            project, _ = await projects.create_project(session, f"test/{uuid.uuid4().hex[:8]}")
            _, secret = await projects.create_token(
                session, project.id, "admin", ["admin"], "runner", "platform_verified"
            )
        headers = auth(secret)
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            await define_suite(client, headers)
            yield state, client, headers


async def _issue_reports(url: str, data_dir: Path, signing_key_file: Path) -> str:
    """A finished evaluation (with outputs) and a running one; the report's id."""
    async with _serving(url, data_dir, signing_key_file) as (_, client, headers):
        report_id = ""
        for finished in (True, False):
            evaluation = await start_evaluation(client, headers)
            path = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
            # Short outputs stay in the case's row, long ones go to `case_outputs`.
            cases = [
                case("accuracy", f"e{i:02d}", output={"a": i, "t": "x" * 200 * (i % 2)})
                for i in range(11, -1, -1)
            ]
            cases += [case("no_harm", f"e{i:02d}") for i in range(0, 12, 3)]
            sent = await client.post(path + "/cases", json={"cases": cases}, headers=headers)
            assert sent.status_code == 200, sent.text
            if finished:
                done = await client.post(path + "/finish", headers=headers)
                assert done.status_code == 201, done.text
                report_id = done.json()["report_id"]
    return report_id


async def test_0013_moves_every_case_and_output_and_back(
    own_database: str, tmp_path: Path, signing_key_file: Path
) -> None:
    url = own_database
    report_id = await _issue_reports(url, tmp_path, signing_key_file)
    at_head = await _fetch(
        url, CASES_WITH_OUTPUTS.format(output="coalesce(c.output, o.output)", join=JOINED)
    )
    assert len(at_head) == 2 * (12 + 4)
    assert sum(row[-1] is not None for row in at_head) == 2 * 12
    apart = await _fetch(url, "SELECT count(*) FROM case_outputs")
    in_rows = await _fetch(url, "SELECT count(*) FROM cases WHERE output IS NOT NULL")
    assert apart == in_rows == [(12,)]
    report_before = await _fetch(url, f"SELECT digest, body FROM reports WHERE id = '{report_id}'")

    await asyncio.to_thread(command.downgrade, alembic_config(url), "0012")
    unpartitioned = await _fetch(url, CASES_WITH_OUTPUTS.format(output="c.output", join=""))
    assert unpartitioned == at_head
    assert await _fetch(url, "SELECT to_regclass('case_outputs')") == [(None,)]

    await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
    assert await _fetch(url, "SELECT count(*) FROM case_outputs") == apart
    assert (
        await _fetch(
            url, CASES_WITH_OUTPUTS.format(output="coalesce(c.output, o.output)", join=JOINED)
        )
        == at_head
    )
    # Each case's position is its example's rank in the dataset version (id byte order).
    positions = await _fetch(
        url,
        "SELECT c.example_position, (SELECT count(*) FROM examples x WHERE"
        " x.dataset_version_id = e.dataset_version_id AND x.example_id < c.example_id)"
        " FROM cases c JOIN examples e ON e.example_id = c.example_id",
    )
    assert positions and all(stored == rank for stored, rank in positions)
    partitioned = await _fetch(
        url,
        "SELECT c.relname, count(i.inhrelid) FROM pg_partitioned_table p"
        " JOIN pg_class c ON c.oid = p.partrelid JOIN pg_inherits i ON i.inhparent = c.oid"
        " GROUP BY c.relname ORDER BY 1",
    )
    assert partitioned == [("case_outputs", 16), ("cases", 16)]
    after = await _fetch(url, f"SELECT digest, body FROM reports WHERE id = '{report_id}'")
    assert after == report_before


async def test_0015_gives_envelopes_their_reports_issued_at_and_takes_it_back(
    own_database: str, tmp_path: Path, signing_key_file: Path
) -> None:
    url = own_database
    await _issue_reports(url, tmp_path, signing_key_file)
    pairs = "SELECT e.issued_at, r.issued_at FROM report_envelopes e JOIN reports r ON r.id = e.report_id"
    at_head = await _fetch(url, pairs)
    assert at_head and all(envelope == report for envelope, report in at_head)

    await asyncio.to_thread(command.downgrade, alembic_config(url), "0014")
    column = (
        "SELECT count(*) FROM information_schema.columns"
        " WHERE table_name = 'report_envelopes' AND column_name = 'issued_at'"
    )
    assert await _fetch(url, column) == [(0,)]

    await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
    assert await _fetch(url, pairs) == at_head
    indexes = await _fetch(
        url,
        "SELECT indexname FROM pg_indexes WHERE tablename = 'report_envelopes'"
        " AND indexname LIKE 'ix_%' ORDER BY 1",
    )
    assert indexes == [
        ("ix_report_envelopes_project_issued",),
        ("ix_report_envelopes_project_status_issued",),
        ("ix_report_envelopes_project_suite_status_issued",),
    ]


async def test_0017_stores_manifests_as_digests_and_gives_the_documents_back(
    own_database: str, tmp_path: Path, signing_key_file: Path
) -> None:
    url = own_database
    report_id = await _issue_reports(url, tmp_path, signing_key_file)
    await asyncio.to_thread(command.downgrade, alembic_config(url), "0016")
    digests = [hashlib.sha256(str(i).encode()).digest() for i in range(25)]
    written = rfc8785.dumps(["sha256:" + d.hex() for d in digests])
    connection = await asyncpg.connect(to_plain_url(url))
    try:
        await connection.execute(
            "INSERT INTO evidence_manifests (report_id, check_id, manifest, digest)"
            " VALUES ($1, 'big', $2, $3)",
            uuid.UUID(report_id),
            written,
            "sha256:" + hashlib.sha256(written).hexdigest(),
        )
    finally:
        await connection.close()
    stored = f"SELECT digests, digest FROM evidence_manifests WHERE report_id = '{report_id}'"
    as_written = f"SELECT manifest, digest FROM evidence_manifests WHERE report_id = '{report_id}'"

    await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
    [(raw, digest)] = await _fetch(url, stored)
    assert raw == b"".join(digests) and document_of(raw) == written
    assert digest == "sha256:" + hashlib.sha256(written).hexdigest()

    await asyncio.to_thread(command.downgrade, alembic_config(url), "0016")
    assert await _fetch(url, as_written) == [(written, digest)]
    await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
    assert await _fetch(url, stored) == [(raw, digest)]


async def test_retention_removes_only_the_aged_case_in_a_partitioned_table(
    own_database: str, tmp_path: Path, signing_key_file: Path
) -> None:
    """A row is named by its key: in a partitioned table the same ctid names a row in every
    partition, and retention must not clear outputs of cases in other partitions."""
    from datetime import timedelta

    from app.services import retention

    async with _serving(own_database, tmp_path, signing_key_file) as (state, client, headers):
        partitions: dict[str, str] = {}
        # Evaluations until two sit in different partitions, each partition's first rows.
        while len(partitions) < 2:
            evaluation = (await start_evaluation(client, headers))["evaluation_id"]
            path = f"/api/v1/evaluations/{evaluation}/cases"
            cases = [case("accuracy", f"e{i:02d}", output={"a": i}) for i in range(12)]
            cases += [case("no_harm", f"e{i:02d}", output={"v": i}) for i in range(12)]
            sent = await client.post(path, json={"cases": cases}, headers=headers)
            assert sent.status_code == 200, sent.text
            (partition,) = (
                await _fetch(
                    own_database,
                    "SELECT DISTINCT tableoid::regclass::text FROM cases"
                    f" WHERE evaluation_id = '{evaluation}'",
                )
            )[0]
            partitions.setdefault(partition, evaluation)
        aged, kept = partitions.values()
        # More rows in the kept evaluation's partition than in the aged one's, so that the
        # aged row's new version (past the aged partition's rows) has a namesake there.
        more = [
            case("helpfulness", f"e{i:02d}", r, score=0.5, output={"h": i})
            for i in range(12)
            for r in range(2)
        ]
        sent = await client.post(
            f"/api/v1/evaluations/{kept}/cases", json={"cases": more}, headers=headers
        )
        assert sent.status_code == 200, sent.text
        await _execute(
            own_database,
            # Aged by the operator's hand: created_at is frozen, so with triggers off.
            "SET session_replication_role = replica;"
            " UPDATE cases SET created_at = now() - interval '90 days'"
            f" WHERE evaluation_id = '{aged}' AND check_id = 'accuracy' AND example_id = 'e00'",
        )
        result = await retention.apply(state.sessionmaker, state.object_store, timedelta(days=30))
    assert result.outputs == 1
    removed = await _fetch(
        own_database,
        "SELECT evaluation_id::text, example_id FROM cases WHERE output_removed_at IS NOT NULL",
    )
    assert removed == [(aged, "e00")]
    assert await _fetch(
        own_database,
        f"SELECT count(*) FROM cases WHERE evaluation_id = '{kept}' AND output IS NULL",
    ) == [(0,)]
