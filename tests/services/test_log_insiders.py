"""An insider with the database and the signing key, against the transparency log: each attack
of docs/transparency.md section 4 is run on a database of its own (the shared one's log stays
whole) with the real service, and `evalbook witness` or `evalbook log verify` catches it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from app.api.main import create_app
from app.api.state import state_of
from app.digest.canonical import canonical_and_digest
from app.digest.merkle import leaf_hash
from app.digest.signing import envelope, load_private_key, report_statement
from app.platform.config import Settings, to_plain_url
from tests.bundle_helpers import download, export, node_verify, python_verify
from tests.clients.test_gate import SUITE, _define, _report
from tests.conftest import REPO, cli_admin_token, witness_vkey
from tests.factories import evalbook_cli
from tests.served import uvicorn_serving

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


async def insider(owner: str, *statements: tuple[str, tuple[Any, ...]]) -> None:
    """Statements as the database's owner, triggers off (as one who drops them would)."""
    connection = await asyncpg.connect(to_plain_url(owner))
    try:
        async with connection.transaction():
            await connection.execute("SET LOCAL session_replication_role = replica")
            for sql, args in statements:
                await connection.execute(sql, *args)
    finally:
        await connection.close()


async def cli(*args: str) -> tuple[int, str]:
    """`evalbook ARGS` with this process's environment: (exit, output)."""
    return await evalbook_cli(*args, env=dict(os.environ))


async def test_insiders_are_caught(
    own_database: tuple[str, str], settings: Settings, witness_key: Path, tmp_path: Path
) -> None:
    owner, service = own_database
    admin = await asyncio.to_thread(cli_admin_token, owner)
    served_settings = settings.model_copy(
        update={"database_url": service, "data_dir": tmp_path / "data"}
    )
    served = create_app(served_settings)
    async with uvicorn_serving(served) as port:
        base = f"http://127.0.0.1:{port}"
        log = state_of(served).transparency
        headers = {"Authorization": f"Bearer {admin}"}
        state = tmp_path / "witness.json"
        witness = ("witness", "--log", base, "--key", str(witness_key), "--state", str(state))
        witness = (*witness, "--name", "witness.test")
        monitor = ("log", "verify", "--log", base, "--token", admin)
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await _define(client, headers)
            assert SUITE["checks"]
            subject = "sha1:" + "a" * 40
            first = await _report(client, headers, subject, ["pass"] * 4)
            second = await _report(client, headers, subject, ["pass", "pass", "pass", "fail"])
            third = await _report(client, headers, "sha1:" + "b" * 40, ["pass"] * 4)
            last = await _report(client, headers, "sha1:" + "c" * 40, ["pass"] * 4)
            await settled(log, 5)
            code, out = await cli(*witness)
            assert code == 0 and "cosigned size 5" in out, out
            code, out = await cli(*monitor)
            assert code == 0 and "0 disagreement(s)" in out, out
            # A monitor that keeps its last checkpoint and counts the witness's cosignature.
            kept = ("--state", str(tmp_path / "monitor.json"))
            cosigned_by = ("--witness-key", witness_vkey(witness_key), "--min-witnesses", "1")
            code, out = await cli(*monitor, *kept, *cosigned_by)
            assert code == 0 and "0 disagreement(s)" in out, out
            code, out = await cli(
                *monitor, "--witness-key", witness_vkey(witness_key), "--min-witnesses", "2"
            )
            assert code == 1 and "1 valid cosignature(s) by the given witnesses" in out, out
            cosigned = (await client.get("/log/checkpoint")).text
            assert "\u2014 witness.test " in cosigned

            # 1. Rewrite a report and sign it again with the service's own key.
            body = dict(third["body"])
            body["result"] = "fail"
            digest = await rewrite_and_resign(owner, settings, third["report_id"], body, "fail")
            code, out = await cli(*monitor)
            assert code == 1, out
            assert f"entry 3: report {third['report_id']} is served with digest {digest}" in out
            # Its bundle, checked by both verifiers with a witness asked for: refused.
            record = await export(client, headers, third["report_id"])
            bundle = await download(client, headers, record["bundle_id"], tmp_path / "b.gz")
            strict = ("--witness-key", witness_vkey(witness_key), "--min-witnesses", "1")
            for verify in (python_verify, node_verify):
                code, outcome = await asyncio.to_thread(verify, bundle, *strict)
                assert code == 1, outcome
                assert {f["code"] for f in outcome["failures"]} == {"log"}, outcome
                assert "another report digest" in outcome["failures"][0]["what"]

            # 2. Swap which of two reports is current.
            first_id, second_id = uuid.UUID(first["report_id"]), uuid.UUID(second["report_id"])
            await insider(
                owner,
                (
                    "UPDATE report_envelopes SET status = 'superseded', superseded_by = $2,"
                    " superseded_at = now(), superseded_reason = 're_evaluation'"
                    " WHERE report_id = $1",
                    (second_id, first_id),
                ),
                (
                    "UPDATE report_envelopes SET status = 'current', superseded_by = NULL,"
                    " superseded_at = NULL, superseded_reason = NULL WHERE report_id = $1",
                    (first_id,),
                ),
                # With the triggers off, the list stamp stays put: moved by hand so that the
                # served lists show the swap at once (a restart would too).
                ("UPDATE report_list_stamps SET stamp = stamp + 1 WHERE $1::int = 1", (1,)),
            )
            code, out = await cli(*monitor)
            assert code == 1, out
            assert f"report {first['report_id']} was superseded by {second['report_id']}" in out
            assert f"report {second['report_id']} is served as superseded, but the log" in out
            # The service's own check refuses to export the swapped report: no bundle of it.
            answer = await client.post(
                "/evaluations/api/reports/bundle",
                json={"report_id": first["report_id"]},
                headers=headers,
            )
            assert answer.status_code == 409 and "signed statement says superseded" in answer.text

            # 3. Delete the newest report's entry and append another in its place.
            forged = json.loads(await _entry(owner, 4))
            forged["report_digest"] = "sha256:" + "0" * 64
            forged_bytes = orjson.dumps(forged, option=orjson.OPT_SORT_KEYS)
            # No restart: the running process cuts from the database, never its memory.
            await insider(
                owner,
                ("DELETE FROM log_cosignatures WHERE size >= $1", (5,)),
                ("DELETE FROM log_checkpoints WHERE size >= $1", (5,)),
                ("DELETE FROM log_entries WHERE idx = $1", (4,)),
                (
                    "INSERT INTO log_entries (idx, kind, report_id, entry, leaf)"
                    " VALUES (4, 'report', $1, $2, $3)",
                    (uuid.UUID(last["report_id"]), forged_bytes, leaf_hash(forged_bytes)),
                ),
            )
            await settled(log, 5)
            code, out = await cli(*witness)
            assert code == 1 and "two roots for 5 entries" in out, out
            code, out = await cli(*monitor, *kept)
            assert code == 1 and "two roots for 5 entries" in out, out
            assert "\u2014 witness.test " not in (await client.get("/log/checkpoint")).text
            await refused(client, headers, last["report_id"], tmp_path, strict, "log")

            # 4. Drop the newest entry altogether.
            await insider(
                owner,
                ("DELETE FROM log_checkpoints WHERE size >= $1", (4,)),
                ("DELETE FROM log_entries WHERE idx = $1", (4,)),
            )
            await settled(log, 4)
            code, out = await cli(*witness)
            assert code == 1 and "the log shrank: 5 entries before, 4 now" in out, out
            code, out = await cli(*monitor)
            assert code == 1, out
            assert f"report {last['report_id']} is served but has no entry in the log" in out
            await refused(client, headers, last["report_id"], tmp_path, strict, "log")

            # 5. An entry for a report the service does not serve: the monitor names it.
            ghost = uuid.uuid4()
            phantom = json.loads(await _entry(owner, 3))
            phantom["report_id"] = str(ghost)
            phantom_bytes = orjson.dumps(phantom, option=orjson.OPT_SORT_KEYS)
            await insider(
                owner,
                (
                    "INSERT INTO log_entries (idx, kind, report_id, entry, leaf)"
                    " VALUES (4, 'report', $1, $2, $3)",
                    (ghost, phantom_bytes, leaf_hash(phantom_bytes)),
                ),
            )
            await settled(log, 5)
            code, out = await cli(*monitor)
            assert code == 1 and f"entry 4: report {ghost} is logged but answers 404" in out, out


async def rewrite_and_resign(
    owner: str, settings: Settings, report_id: str, body: dict[str, Any], result: str
) -> str:
    """As an insider: store `body` as the report's, signed again with the service's own key;
    the new digest."""
    data, digest = canonical_and_digest(body)
    key = load_private_key(settings.signing_key_file)  # type: ignore[arg-type]
    signed = envelope(report_statement(data, report_id, digest, body["subject"]), key)
    await insider(
        owner,
        (
            "UPDATE reports SET body = $2, digest = $3, result = $4 WHERE id = $1",
            (uuid.UUID(report_id), data, digest, result),
        ),
        (
            "UPDATE report_attestations SET envelope = $2, digest = $3 WHERE report_id = $1",
            (uuid.UUID(report_id), signed, "sha256:" + hashlib.sha256(signed).hexdigest()),
        ),
    )
    return digest


async def settled(log: Any, size: int) -> None:
    """Wait until the newest checkpoint is of `size` entries (cut here, or by the background
    cutter when it holds the lock)."""
    for _ in range(200):
        await log.cut()
        latest = await log.checkpoint()
        if latest is not None and latest[0] == size:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no checkpoint of {size} entries was cut")


async def refused(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    report_id: str,
    tmp_path: Path,
    strict: tuple[str, ...],
    code: str,
) -> None:
    """The report's bundle, exported now, fails both verifiers with `code` among its failures."""
    record = await export(client, headers, report_id)
    bundle = await download(client, headers, record["bundle_id"], tmp_path / f"{uuid.uuid4()}.gz")
    for verify in (python_verify, node_verify):
        exit_code, outcome = await asyncio.to_thread(verify, bundle, *strict)
        assert exit_code == 1, outcome
        assert code in {f["code"] for f in outcome["failures"]}, outcome


async def _entry(owner: str, index: int) -> bytes:
    connection = await asyncpg.connect(to_plain_url(owner))
    try:
        value: bytes = await connection.fetchval(
            "SELECT entry FROM log_entries WHERE idx = $1", index
        )
        return bytes(value)
    finally:
        await connection.close()


def test_witness_prints_its_key(witness_key: Path) -> None:
    answer = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "witness",
            "--key",
            str(witness_key),
            "--print-vkey",
            "--name",
            "witness.test",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert answer.stdout.startswith("witness.test+")
