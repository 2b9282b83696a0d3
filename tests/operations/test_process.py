"""The command line and a real uvicorn process."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import (
    REPO,
    cli_admin_token,
    create_token,
    free_port,
    run_cli,
    serve_process,
    wait_ready,
)

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


def test_cli_project_and_token(database_url: str) -> None:
    created = run_cli(database_url, "project", "create", "cli-org/cli-proj")
    assert created.returncode == 0, created.stderr
    reported_runner = ("--kind", "runner", "--assurance", "reported")
    permissions = "evaluation.write,report.read"
    token = create_token(database_url, "cli-org/cli-proj", "ci", permissions, *reported_runner)
    assert token.returncode == 0, token.stderr
    lines = token.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evb_")
    missing = create_token(database_url, "no/such", "x", "report.read")
    assert missing.returncode == 66 and "no project" in missing.stderr  # not found
    bad = create_token(database_url, "cli-org/cli-proj", "x", "everything")
    assert bad.returncode == 64  # a permission that does not exist: a wrong command line


def test_served_by_uvicorn(database_url: str, tmp_path: Path, key_env: dict[str, str]) -> None:
    port = free_port()
    env = {
        **os.environ,
        "EVALBOOK_DATABASE_URL": database_url,
        "EVALBOOK_DATA_DIR": str(tmp_path),
        **key_env,
        "EVALBOOK_MAX_HEADER_FIELDS": "20",
    }
    process = serve_process(port, env)
    try:
        assert process.stdout is not None
        listening = process.stdout.readline()
        assert f"http://127.0.0.1:{port}" in listening
        token = cli_admin_token(database_url)
        base = f"http://127.0.0.1:{port}"
        wait_ready(base)
        headers = {"Authorization": f"Bearer {token}"}
        created = httpx.put(
            f"{base}/api/v1/scorers/s/versions/1", json={"definition": {}}, headers=headers
        )
        assert created.status_code == 201, created.text
        refused = httpx.put(
            f"{base}/api/v1/scorers/s/versions/1",
            content=b'{"definition": {"a": 1, "a": 1}}',
            headers={**headers, "Content-Type": "application/json"},
        )
        assert refused.status_code == 422
        assert refused.headers["content-type"].startswith("application/problem+json")
        # The server's head limits come from the settings (here: 20 fields at most).
        crowded = httpx.get(f"{base}/healthz", headers={f"x-{i}": "1" for i in range(25)})
        assert crowded.status_code == 431, crowded.text
        assert crowded.headers["x-content-type-options"] == "nosniff"
        assert httpx.get(f"{base}/healthz", headers={f"x-{i}": "1" for i in range(10)}).is_success
    finally:
        process.terminate()
        process.wait(20)
    # With an external database, no demo token is made, printed or written.
    assert process.stdout is not None
    assert "evb_" not in process.stdout.read()
    assert not (tmp_path / "demo-token").exists()


def test_the_demo_token_is_a_user_token_capped_at_reported(database_url: str, tmp_path) -> None:
    import asyncio

    import asyncpg

    from app.cli.commands import _demo_token
    from app.identity.auth import hash_secret
    from app.platform.config import to_plain_url

    secret = _demo_token(database_url, tmp_path)
    assert (tmp_path / "demo-token").read_text().strip() == secret

    async def row() -> asyncpg.Record:
        connection = await asyncpg.connect(to_plain_url(database_url))
        try:
            return await connection.fetchrow(
                "SELECT kind, assurance_cap, permissions FROM api_tokens WHERE secret_hash = $1",
                hash_secret(secret),
            )
        finally:
            await connection.close()

    token = asyncio.run(row())
    assert (token["kind"], token["assurance_cap"]) == ("user", "reported")
    assert list(token["permissions"]) == ["admin"]


def _postgres_of(data_dir: Path) -> list[int]:
    """Pids of PostgreSQL processes running on `data_dir`'s embedded server."""
    pgdata = str((data_dir / "postgres").resolve())
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "postgres" in cmdline and pgdata in cmdline:
            pids.append(int(proc.name))
    return pids


def _first_serve(tmp_path: Path) -> tuple[Path, int, subprocess.Popen[str]]:
    """`evalbook serve` on the embedded default, its data in a new tmp_path/data, on a free
    port: (data directory, port, process)."""
    data_dir, port = tmp_path / "data", free_port()
    return data_dir, port, _serve_embedded(data_dir, port)


@contextmanager
def _killed_if_left(process: subprocess.Popen[str]) -> Iterator[None]:
    """Kill the process on the way out if it is still running (a failed assertion left it)."""
    try:
        yield
    finally:
        if process.poll() is None:
            process.kill()


def _serve_embedded(data_dir: Path, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOOK_")}
    env["EVALBOOK_DATA_DIR"] = str(data_dir)
    return serve_process(port, env)


@pytest.mark.embedded_only
def test_serve_on_the_embedded_default_stops_postgres_on_sigterm_and_sigint(tmp_path) -> None:
    data_dir, port, process = _first_serve(tmp_path)
    base = f"http://127.0.0.1:{port}"
    with _killed_if_left(process):
        assert process.stdout is not None
        assert f"listening on {base}" in process.stdout.readline()
        announced = process.stdout.readline()
        token_file = data_dir / "demo-token"
        token = token_file.read_text().strip()
        assert token in announced and str(token_file) in announced
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        wait_ready(base)
        headers = {"Authorization": f"Bearer {token}"}
        created = httpx.put(
            f"{base}/api/v1/scorers/s/versions/1", json={"definition": {}}, headers=headers
        )
        assert created.status_code == 201, created.text
        assert _postgres_of(data_dir)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    assert _postgres_of(data_dir) == []

    # A start on the same data directory finds the data, mints no new token, and Ctrl-C
    # (SIGINT) stops PostgreSQL too.
    process = _serve_embedded(data_dir, port)
    with _killed_if_left(process):
        assert process.stdout is not None
        process.stdout.readline()
        wait_ready(base)
        read = httpx.get(f"{base}/api/v1/scorers/s/versions/1", headers=headers)
        assert read.status_code == 200, read.text
        assert token_file.read_text().strip() == token
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
        rest = process.stdout.read()
        assert "evb_" not in rest and "Traceback" not in rest, rest
        # Embedded PostgreSQL's own command lines stay out of the service's output.
        assert "pg_ctl" not in rest and "commandline" not in rest, rest
    assert _postgres_of(data_dir) == []


@pytest.mark.embedded_only
def test_migrate_on_start_false_is_honoured_with_the_embedded_database(tmp_path: Path) -> None:
    """EVALBOOK_MIGRATE_ON_START=false: a fresh embedded database is not migrated (the serve
    stops, naming `evalbook migrate`); once migrated, it serves."""
    data_dir, port = tmp_path / "data", free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOOK_")}
    env.update(EVALBOOK_DATA_DIR=str(data_dir), EVALBOOK_MIGRATE_ON_START="false")
    process = serve_process(port, env)
    with _killed_if_left(process):
        output, _ = process.communicate(timeout=120)
    assert process.returncode == 2, output
    assert "no schema" in output and "evalbook migrate" in output, output
    assert "listening" not in output and "Traceback" not in output, output
    assert _postgres_of(data_dir) == []
    migrated = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "migrate"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert migrated.returncode == 0, migrated.stderr
    process = serve_process(port, env)
    with _killed_if_left(process):
        assert process.stdout is not None
        assert "listening" in process.stdout.readline()
        wait_ready(f"http://127.0.0.1:{port}")
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    assert _postgres_of(data_dir) == []


@pytest.mark.embedded_only
def test_serve_recovers_from_a_user_that_died_without_stopping_postgres(tmp_path) -> None:
    data_dir, port, process = _first_serve(tmp_path)
    base = f"http://127.0.0.1:{port}"
    with _killed_if_left(process):
        process.stdout.readline()  # type: ignore[union-attr]
        wait_ready(base)
        process.kill()  # as a crash would: no chance to stop PostgreSQL
        process.wait(30)
    handles = data_dir / "postgres" / ".handle_pids.json"
    assert process.pid in json.loads(handles.read_text())
    assert _postgres_of(data_dir)
    process = _serve_embedded(data_dir, port)
    with _killed_if_left(process):
        wait_ready(base)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    assert _postgres_of(data_dir) == []
