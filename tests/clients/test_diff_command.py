"""`evalbook diff` and the gate's top regressions, against a served process; JUnit read by
junitparser."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import junitparser

from app.api.main import create_app
from app.platform.config import Settings
from tests.clients.test_gate import _define, _gate, _report, cli_against, written_to
from tests.conftest import Project
from tests.served import uvicorn_serving

SUBJECT = "sha1:" + "7" * 40


async def _diff(port: int, token: str, *args: str) -> tuple[int, str]:
    return await cli_against(port, token, "diff", *args)


async def test_diff_command_and_gate_regressions(
    project: Project, client: httpx.AsyncClient, settings: Settings, tmp_path: Path
) -> None:
    admin = await project.admin()
    await _define(client, admin)
    before = await _report(client, admin, SUBJECT, ["pass", "pass", "pass", "fail"])
    after = await _report(client, admin, SUBJECT, ["fail", "fail", "pass", "fail"])
    assert after["body"]["result"] == "fail"
    reader = await project.token("report.read")
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _diff(port, reader, after["report_id"], before["report_id"])
        assert code == 0, out
        assert "accuracy" in out and "top regressions in accuracy:" in out
        assert "e0: pass -> fail" in out and "e1: pass -> fail" in out
        code, out = await _diff(port, reader, after["report_id"], before["report_id"], "--json")
        assert code == 0, out
        answer = json.loads(out)
        assert answer["checks"][0]["mcnemar"]["b"] == 2
        # Improvements or regressions, a diff never fails a job: exit 0 both ways.
        code, out = await _diff(port, reader, before["report_id"], after["report_id"])
        assert code == 0 and "top regressions" not in out, out
        code, out = await _diff(port, reader, "nope", before["report_id"])
        assert code == 64, out
        # One table of exits (app.domain.exits): a self-diff is a wrong command line (64), an unknown
        # report is not found (66), a refused token has no permission (77).
        code, out = await _diff(port, reader, after["report_id"], after["report_id"])
        assert code == 64 and "the same report" in out, out
        code, out = await _diff(port, reader, after["report_id"], str(uuid.uuid4()))
        assert code == 66 and "no such report" in out, out
        code, out = await _diff(port, "evb_not-a-token", after["report_id"], before["report_id"])
        assert code == 77 and "HTTP 401" in out, out

        junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
        arguments = ["--subject", SUBJECT, "--suite", "arith", *written_to(junit, summary)]
        code, out = await _gate(port, reader, *arguments)
        assert code == 1, out
        text = summary.read_text()
        assert "**Top regressions in accuracy** against the superseded report" in text
        assert before["report_id"] in text
        assert "- e0: pass -> fail" in text and "- e1: pass -> fail" in text
        (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
        (case,) = list(suite)
        (failure,) = case.result
        assert isinstance(failure, junitparser.Failure)
        assert "e0: pass -> fail" in (failure.text or "")
