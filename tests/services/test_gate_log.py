"""`evalbook gate --verify-log` against a served process on a database of its own: the finish
response carries the log's promise; an honest log passes and the state file follows it; a report
rewritten and re-signed with the service's key, a log forked under the kept checkpoint, a
missing entry and a wrong pinned log key each end the gate with exit 69 (SECURITY ERROR)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
import junitparser
import orjson
import pytest

from app.api.main import create_app
from app.api.state import state_of
from app.digest.merkle import leaf_hash
from app.platform.config import Settings
from tests.clients.test_gate import _define, _report, cli_against
from tests.conftest import cli_admin_token, witness_vkey
from tests.served import uvicorn_serving
from tests.services.test_log_insiders import _entry, insider, rewrite_and_resign, settled

pytestmark = pytest.mark.server


async def test_the_gate_checks_the_log(
    own_database: tuple[str, str], settings: Settings, witness_key: Path, tmp_path: Path
) -> None:
    owner, service = own_database
    admin = await asyncio.to_thread(cli_admin_token, owner)
    served = create_app(
        settings.model_copy(update={"database_url": service, "data_dir": tmp_path / "data"})
    )
    state = tmp_path / "gate-log.json"
    checked = ("--verify-log", "--log-state", str(state), "--log-wait", "20")
    async with uvicorn_serving(served) as port:
        log = state_of(served).transparency
        headers = {"Authorization": f"Bearer {admin}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            await _define(client, headers)
            x, y, z = ("sha1:" + c * 40 for c in "def")
            first = await _report(client, headers, x, ["pass"] * 4)
            # The finish response carries the entry's index and where its proof is served.
            assert first["envelope"]["log_index"] == 0
            assert first["envelope"]["log"].endswith(f"/reports/{first['report_id']}/log")
            code, out = await cli_against(port, admin, "gate", "--subject", x, *checked)
            assert code == 0 and "gate: pass" in out, out
            assert "\n1\n" in json.loads(state.read_text())["note"]

            await _report(client, headers, y, ["pass"] * 4)
            third = await _report(client, headers, z, ["pass"] * 4)
            assert third["envelope"]["log_index"] == 2
            code, out = await cli_against(port, admin, "gate", "--subject", y, *checked)
            assert code == 0, out
            kept = json.loads(state.read_text())
            assert "\n3\n" in kept["note"] and kept["log_vkey"] == log.key.verifier.vkey()

            # A pinned log key that is not the log's: the service cannot be trusted.
            other_state = tmp_path / "other.json"
            code, out = await cli_against(
                port,
                admin,
                "gate",
                "--subject",
                x,
                "--verify-log",
                "--log-state",
                str(other_state),
                "--log-key",
                witness_vkey(witness_key),
            )
            assert code == 69 and "SECURITY ERROR" in out, out

            # 1. The third report rewritten and signed again with the service's own key.
            body = dict(third["body"])
            body["valid_until"] = "2999-01-01T00:00:00Z"
            await rewrite_and_resign(owner, settings, third["report_id"], body, "pass")
            third_id = uuid.UUID(third["report_id"])
            junit = tmp_path / "junit.xml"
            code, out = await cli_against(
                port, admin, "gate", "--subject", z, *checked, "--junit", str(junit)
            )
            assert code == 69, out
            assert "SECURITY ERROR" in out and "names another report digest" in out, out
            (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
            assert suite.errors == 1

            # 2. The log forked under the kept checkpoint: the newest entry replaced, cut again.
            forged = json.loads(await _entry(owner, 2))
            forged["report_digest"] = "sha256:" + "0" * 64
            forged_bytes = orjson.dumps(forged, option=orjson.OPT_SORT_KEYS)
            await insider(
                owner,
                ("DELETE FROM log_cosignatures WHERE size >= $1", (3,)),
                ("DELETE FROM log_checkpoints WHERE size >= $1", (3,)),
                ("DELETE FROM log_entries WHERE idx = $1", (2,)),
                (
                    "INSERT INTO log_entries (idx, kind, report_id, entry, leaf)"
                    " VALUES (2, 'report', $1, $2, $3)",
                    (third_id, forged_bytes, leaf_hash(forged_bytes)),
                ),
            )
            await settled(log, 3)
            code, out = await cli_against(port, admin, "gate", "--subject", x, *checked)
            assert code == 69 and "two roots for 3 entries" in out, out
            # The kept checkpoint is not replaced by the fork.
            assert json.loads(state.read_text()) == kept

            # 3. The first report's entry gone: the log holds nothing for it.
            await insider(owner, ("DELETE FROM log_entries WHERE idx = $1", (0,)))
            code, out = await cli_against(
                port, admin, "gate", "--subject", x, "--verify-log", "--log-state", str(other_state)
            )
            assert code == 69 and "the log holds no entry for it" in out, out
