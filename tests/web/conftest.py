"""Fixtures of the browser tests: `evalbook serve` in its own process."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from tests.conftest import MotoServer, cli_admin_token, free_port, serve_process, wait_ready


@pytest.fixture(scope="module")
def served(
    database_url: str,
    moto_server: MotoServer,
    tmp_path_factory: pytest.TempPathFactory,
    key_env: dict[str, str],
) -> Iterator[tuple[str, str]]:
    """`evalbook serve` on a free port; (base URL, an admin token of the demo project)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "EVALBOOK_DATABASE_URL": database_url,
        "EVALBOOK_DATA_DIR": str(tmp_path_factory.mktemp("served")),
        **key_env,
        "EVALBOOK_S3_ENDPOINT_URL": moto_server.url,
        "EVALBOOK_S3_BUCKET": "evalbook-browser",
        "EVALBOOK_S3_ACCESS_KEY_ID": "test",
        "EVALBOOK_S3_SECRET_ACCESS_KEY": "test",
        "EVALBOOK_PUBLIC_BASE_URL": base,
        "EVALBOOK_NOTIFICATIONS_ENABLED": "false",
        "EVALBOOK_LOG_LEVEL": "warning",
    }
    process = serve_process(port, env)
    # Everything the service prints is read as it comes (a pipe nobody reads stalls the
    # service once full) and kept, to show if it never becomes ready.
    output: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: output.extend(process.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        # Its first line (the start-up is under way) before the project is made by the CLI.
        deadline = time.monotonic() + 60
        while not output and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        token = cli_admin_token(database_url)
        try:
            wait_ready(base, process=process)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its output:\n{''.join(output)[-5000:]}") from None
        yield base, token
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError("".join(output)[-5000:]) from None
