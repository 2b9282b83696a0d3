"""`evalbook log verify` reads board entries too: each against the board and statement the API
serves, so a board rewritten behind the triggers is named (docs/boards.md, section 3)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest

from app.api.main import create_app
from app.api.state import state_of
from app.platform.config import Settings
from tests.clients.test_gate import _define, _report
from tests.conftest import cli_admin_token
from tests.served import uvicorn_serving
from tests.services.test_log_insiders import cli, insider, settled

pytestmark = pytest.mark.server


async def test_the_monitor_checks_board_entries(
    own_database: tuple[str, str], settings: Settings, tmp_path: Path
) -> None:
    owner, service = own_database
    admin = await asyncio.to_thread(cli_admin_token, owner)
    served = create_app(
        settings.model_copy(update={"database_url": service, "data_dir": tmp_path / "data"})
    )
    async with uvicorn_serving(served) as port:
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {admin}"}
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            await _define(client, headers)
            await _report(client, headers, "sha1:" + "a" * 40, ["pass"] * 4)
            await _report(client, headers, "sha1:" + "b" * 40, ["pass", "fail", "fail", "pass"])
            made = await client.post(
                "/evaluations/api/boards",
                json={"suite": "arith", "version": "1", "check_id": "accuracy"},
                headers=headers,
            )
            assert made.status_code == 201, made.text
            board = made.json()
            assert board["log_index"] == 2
            await settled(state_of(served).transparency, 3)
            monitor = ("log", "verify", "--log", base, "--token", admin)
            code, out = await cli(*monitor)
            assert code == 0 and "0 disagreement(s); 3 reports and boards checked" in out, out

            await insider(
                owner,
                (
                    "UPDATE boards SET digest = $2 WHERE id = $1",
                    (uuid.UUID(board["board_id"]), "sha256:" + "0" * 64),
                ),
            )
            code, out = await cli(*monitor)
            assert code == 1, out
            assert (
                f"entry 2: board {board['board_id']} is served with digest sha256:{'0' * 64}, "
                f"the log says {board['digest']}"
            ) in out
