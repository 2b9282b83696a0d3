"""`evalbook board create|show` against a served process: the table and the JSON, and the exit
statuses of app.domain.exits for a wrong command line, an unknown board, a refused board and token."""

from __future__ import annotations

import json
import uuid

import httpx

from app.api.main import create_app
from app.platform.config import Settings
from tests.clients.test_gate import _define, _report, cli_against
from tests.conftest import Project
from tests.served import uvicorn_serving

CREATE = ("board", "create", "--suite", "arith", "--version", "1", "--check", "accuracy")


async def test_board_create_and_show(
    project: Project, client: httpx.AsyncClient, settings: Settings
) -> None:
    admin = await project.admin()
    await _define(client, admin)
    best, worst = "sha1:" + "a" * 40, "sha1:" + "b" * 40
    await _report(client, admin, best, ["pass"] * 4)
    await _report(client, admin, worst, ["pass", "fail", "fail", "fail"])
    writer = await project.token("board.write", "report.read")
    reader = await project.token("report.read")
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await cli_against(port, writer, *CREATE)
        assert code == 0, out
        lines = out.splitlines()
        assert "accuracy on arith v1 (mcnemar_exact, Holm at alpha 0.05, 1 pairs)" in lines[0]
        # Four examples cannot separate 4 of 4 from 1 of 4: both rank 1-2, both at the top.
        assert lines[3].split() == ["1", "1-2", "1", "*", best]
        assert lines[4].split() == ["2", "1-2", "0.25", "*", worst]
        assert "2 of 2 tied at the top" in out
        code, out = await cli_against(port, writer, *CREATE, "--subject", best, "--json")
        assert code == 2 and "2 to 200 subjects" in out, out
        code, out = await cli_against(port, writer, *CREATE, "--json", "--alpha", "0.1")
        assert code == 0, out
        board = json.loads(out)
        assert board["body"]["alpha"] == 0.1

        code, out = await cli_against(port, reader, "board", "show", board["board_id"])
        assert code == 0 and board["digest"] in out, out
        code, out = await cli_against(port, reader, "board", "show", str(uuid.uuid4()))
        assert code == 66 and "no such board" in out, out
        code, out = await cli_against(port, reader, "board", "show", "nope")
        assert code == 64, out
        code, out = await cli_against(port, reader, *CREATE)
        assert code == 77 and "board.write" in out, out
        code, out = await cli_against(port, writer, "board", "create", "--suite", "arith")
        assert code == 64, out
        code, out = await cli_against(
            port, writer, *CREATE[:4], "--version", "9", "--check", "accuracy"
        )
        assert code == 66, out
