"""A revoked token stops working in every process at once, not when caches expire."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import cli_admin_token, free_port, serve_process, wait_ready

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


@contextmanager
def serving(database_url: str, data_dir: Path, key_env: dict[str, str]) -> Iterator[str]:
    """`evalbook serve` with a principal cache that would keep a token for a minute."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOOK_")}
    env.update(
        EVALBOOK_DATABASE_URL=database_url,
        EVALBOOK_DATA_DIR=str(data_dir),
        **key_env,
        EVALBOOK_AUTH_CACHE_SECONDS="60",
        EVALBOOK_NOTIFICATIONS_ENABLED="false",
        EVALBOOK_LOG_LEVEL="warning",
        EVALBOOK_CALLBACK_ALLOW_HTTP="true",
        EVALBOOK_CALLBACK_PRIVATE_HOSTS='["127.0.0.1"]',
    )
    # Its output goes to a file, which a failed start shows.
    log = data_dir.parent / f"{data_dir.name}-serve.log"
    with log.open("w") as output:
        process = serve_process(port, env, output=output.fileno())
    try:
        base = f"http://127.0.0.1:{port}"
        try:
            wait_ready(base, process=process)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its output:\n{log.read_text()[-4000:]}") from None
        yield base
    finally:
        process.terminate()
        process.wait(30)


def test_a_revocation_reaches_the_other_process_long_before_its_cache_expires(
    database_url: str, tmp_path: Path, key_env: dict[str, str]
) -> None:
    """Process b would keep the token for 60 s; it refuses it as soon as the notification
    arrives (well under 5 s; the latency itself is a measurement, not an assertion here)."""
    admin = {"Authorization": f"Bearer {cli_admin_token(database_url, 'revoke/demo')}"}
    with (
        serving(database_url, tmp_path / "a", key_env) as a,
        serving(database_url, tmp_path / "b", key_env) as b,
    ):
        linked = httpx.post(
            f"{a}/api/v1/peers",
            json={"name": "gate", "callback_url": "http://127.0.0.1:9/hook"},
            headers=admin,
        )
        assert linked.status_code == 201, linked.text
        peer = {"Authorization": f"Bearer {linked.json()['token']}"}
        read = f"{b}/evaluations/api/reports/forSubject?digest=sha1:0123abcd"
        with httpx.Client() as http:
            for _ in range(3):  # cached in process b from now on
                assert http.get(read, headers=peer).status_code == 200
            unlinked = http.delete(f"{a}/api/v1/peers/{linked.json()['peer_id']}", headers=admin)
            assert unlinked.status_code == 204
            revoked_at = time.monotonic()
            while (status := http.get(read, headers=peer).status_code) == 200:
                assert time.monotonic() - revoked_at < 5, "process b still admits the token"
        assert status == 401
