"""Twenty reports issued at once through two `evalbook serve` processes on one database get
contiguous log indexes and one consistent tree."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
from pathlib import Path

import asyncpg
import httpx
import pytest

from app.digest import merkle
from app.platform.config import Settings, to_plain_url
from app.tlog import checkpoint, note
from tests.clients.test_gate import _define, _report
from tests.conftest import cli_admin_token, free_port, serve_process, wait_ready

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


def _serve(
    service_url: str, data_dir: Path, key_env: dict[str, str]
) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {
        **os.environ,
        "EVALBOOK_DATABASE_URL": service_url,
        "EVALBOOK_DATA_DIR": str(data_dir),
        **key_env,
        "EVALBOOK_NOTIFICATIONS_ENABLED": "false",
        "EVALBOOK_LOG_CHECKPOINT_SECONDS": "0.2",
        "EVALBOOK_LOG_LEVEL": "warning",
        "EVALBOOK_MIGRATE_ON_START": "false",
    }
    process = serve_process(port, env, output=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    wait_ready(base, process=process)
    return process, base


async def test_twenty_reports_from_two_processes(
    own_database: tuple[str, str], settings: Settings, tmp_path: Path, key_env: dict[str, str]
) -> None:
    owner, service = own_database
    admin = await asyncio.to_thread(cli_admin_token, owner)
    headers = {"Authorization": f"Bearer {admin}"}
    servers = [_serve(service, tmp_path / "data", key_env) for _ in range(2)]
    try:
        bases = [base for _, base in servers]
        async with httpx.AsyncClient(base_url=bases[0], timeout=120) as first:
            await _define(first, headers)
        clients = [httpx.AsyncClient(base_url=b, timeout=120) for b in bases]
        try:
            reports = await asyncio.gather(
                *(
                    _report(clients[i % 2], headers, f"sha1:{i:040x}", ["pass"] * 4)
                    for i in range(20)
                )
            )
        finally:
            for client in clients:
                await client.aclose()
        connection = await asyncpg.connect(to_plain_url(owner))
        try:
            rows = await connection.fetch(
                "SELECT idx, report_id, entry, leaf FROM log_entries ORDER BY idx"
            )
        finally:
            await connection.close()
        assert [r["idx"] for r in rows] == list(range(20))
        assert {str(r["report_id"]) for r in rows} == {r["report_id"] for r in reports}
        leaves = [bytes(r["leaf"]) for r in rows]
        assert all(merkle.leaf_hash(bytes(r["entry"])) == bytes(r["leaf"]) for r in rows)
        async with httpx.AsyncClient(base_url=bases[1], timeout=60) as http:
            vkey = (await http.get("/.well-known/evalbook/keys")).json()["log"]["vkey"]
            for _ in range(100):
                stated = checkpoint.parse(
                    note.verify((await http.get("/log/checkpoint")).content, note.parse_vkey(vkey))
                )
                if stated.size == 20:
                    break
                await asyncio.sleep(0.1)
            assert stated.size == 20 and stated.root == merkle.root(leaves)
            for report in reports[:5]:
                proof = (
                    await http.get(
                        f"/evaluations/api/reports/{report['report_id']}/log", headers=headers
                    )
                ).json()
                path = [base64.b64decode(p) for p in proof["inclusion_proof"]]
                assert merkle.verify_inclusion(
                    leaves[proof["index"]], proof["index"], 20, path, stated.root
                )
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait(20)
