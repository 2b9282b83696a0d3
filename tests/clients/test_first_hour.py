"""A newcomer's first mistakes, through the real command line: a listing creates nothing and
says where it looked; a port in use, a database out of reach or not migrated are one line
naming the next step (no traceback, no "listening"); help shows defaults, valid values and
exit codes; a command line that cannot be run exits 64."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.platform.config import to_asyncpg_url, to_plain_url
from tests.conftest import REPO, free_port


def _evalbook(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOOK_")}
    return subprocess.run(
        [sys.executable, "-m", "app.cli.main", *args],
        cwd=cwd,
        env={**clean, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _one_line(run: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_listings_and_help_create_nothing(tmp_path: Path) -> None:
    listed = _evalbook(tmp_path, "keys", "list")
    assert listed.returncode == 2
    assert f"no EvalBook data directory at {tmp_path / '.evalbook'}" in _one_line(listed)
    for args in (["--help"], ["serve", "--help"], ["keys", "list", "--help"], ["gate", "--help"]):
        shown = _evalbook(tmp_path, *args)
        assert shown.returncode == 0, shown.stderr
    assert list(tmp_path.iterdir()) == [], "nothing is created"
    assert "(default: 8000)" in _evalbook(tmp_path, "serve", "--help").stdout
    gate_help = _evalbook(tmp_path, "gate", "--help").stdout
    assert "64 the command line is wrong" in gate_help and "4  the service cannot" in gate_help
    token_help = _evalbook(tmp_path, "token", "create", "--help").stdout
    assert "report.read" in token_help and "(default: user)" in token_help


def test_a_command_line_that_cannot_be_run_exits_64(tmp_path: Path) -> None:
    for args in (
        ["gate"],
        ["gate", "--subject", "sha1:" + "a" * 40, "--wait", "soon"],
        [
            "token",
            "create",
            "--project",
            "a/b",
            "--name",
            "n",
            "--permissions",
            "x",
            "--kind",
            "god",
        ],
        ["no-such-command"],
    ):
        run = _evalbook(tmp_path, *args)
        assert run.returncode == 64, (args, run.stderr)
        assert "error:" in run.stderr


@pytest.fixture
def empty_database(database_url: str) -> Iterator[str]:
    """A database on the test server with no schema at all."""
    name = f"evalbook_empty_{uuid.uuid4().hex[:8]}"
    admin = to_plain_url(database_url)

    async def run(sql: str) -> None:
        connection = await asyncpg.connect(admin)
        try:
            await connection.execute(sql)
        finally:
            await connection.close()

    asyncio.run(run(f'CREATE DATABASE "{name}"'))
    url = make_url(to_asyncpg_url(database_url)).set(database=name)
    yield to_plain_url(url.render_as_string(hide_password=False))
    asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_serving_names_the_next_step_for_each_first_mistake(
    tmp_path: Path, empty_database: str, database_url: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = _evalbook(tmp_path, "serve", "--port", str(port), EVALBOOK_DATABASE_URL=database_url)
    assert busy.returncode == 2 and "listening" not in busy.stdout
    assert f"port {port} on 127.0.0.1 is in use" in _one_line(busy)
    unmigrated = _evalbook(
        tmp_path,
        "serve",
        "--port",
        str(free_port()),
        EVALBOOK_DATABASE_URL=empty_database,
        EVALBOOK_MIGRATE_ON_START="false",
    )
    assert unmigrated.returncode == 2 and "listening" not in unmigrated.stdout
    assert "has no schema" in (line := _one_line(unmigrated)) and "evalbook migrate" in line
    away = _evalbook(
        tmp_path,
        "serve",
        "--port",
        str(free_port()),
        EVALBOOK_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/nothing",
    )
    assert away.returncode == 2 and "listening" not in away.stdout
    assert "cannot reach the database at 127.0.0.1:" in _one_line(away)
    assert list(tmp_path.iterdir()) == []


def test_migrations_refused_to_the_services_role_are_one_line(
    tmp_path: Path, empty_database: str, service_url: str
) -> None:
    """The service's own login may not create tables: serving with it on a new database."""
    as_service = make_url(to_asyncpg_url(empty_database)).set(
        username=make_url(to_asyncpg_url(service_url)).username
    )
    url = to_plain_url(as_service.render_as_string(hide_password=False))
    refused = _evalbook(tmp_path, "serve", "--port", str(free_port()), EVALBOOK_DATABASE_URL=url)
    assert refused.returncode == 2 and "listening" not in refused.stdout
    line = _one_line(refused)
    assert "the migrations were refused" in line and "evalbook migrate" in line
