"""The command line and a real uvicorn process."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

from tests.conftest import free_port, wait_ready


def run_cli(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EVALBOOK_DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_project_and_token(database_url: str) -> None:
    created = run_cli(database_url, "project", "create", "cli-org/cli-proj")
    assert created.returncode == 0, created.stderr
    token = run_cli(
        database_url,
        "token",
        "create",
        "--project",
        "cli-org/cli-proj",
        "--name",
        "ci",
        "--permissions",
        "evaluation.write,report.read",
        "--kind",
        "runner",
        "--assurance",
        "reported",
    )
    assert token.returncode == 0, token.stderr
    lines = token.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evb_")
    missing = run_cli(
        database_url,
        "token",
        "create",
        "--project",
        "no/such",
        "--name",
        "x",
        "--permissions",
        "report.read",
    )
    assert missing.returncode == 2 and "no project" in missing.stderr
    bad = run_cli(
        database_url,
        "token",
        "create",
        "--project",
        "cli-org/cli-proj",
        "--name",
        "x",
        "--permissions",
        "everything",
    )
    assert bad.returncode == 2


def test_served_by_uvicorn(database_url: str, tmp_path) -> None:
    port = free_port()
    env = {**os.environ, "EVALBOOK_DATABASE_URL": database_url, "EVALBOOK_DATA_DIR": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        listening = process.stdout.readline()
        assert f"http://127.0.0.1:{port}" in listening
        token = process.stdout.readline().rsplit(" ", 1)[-1].strip()
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
    finally:
        process.terminate()
        process.wait(20)
