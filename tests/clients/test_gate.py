"""`evalbook gate` against a served process: exit statuses, JUnit XML read by a maintained
parser (junitparser), the Markdown summary, waiting, and the client's retries."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx
import junitparser
from fastapi import FastAPI, Response

from app.api.main import create_app
from app.cli.client import EvalBookClient
from app.platform.config import Settings
from tests.conftest import Project
from tests.factories import evalbook_cli
from tests.served import uvicorn_serving

SUITE = {
    "validity_hours": 24,
    "checks": [
        {
            "check_id": "accuracy",
            "scorer": {"name": "exact", "version": "1"},
            "dataset": {"name": "four", "version": "1"},
            "aggregation": {"method": "pass_rate", "threshold": 0.5},
        }
    ],
}


async def _define(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    await client.put("/api/v1/scorers/exact/versions/1", json={"definition": {}}, headers=headers)
    examples = [{"id": f"e{i}", "body": {}, "tags": []} for i in range(4)]
    await client.put(
        "/api/v1/datasets/four/versions/1", json={"examples": examples}, headers=headers
    )
    answer = await client.put("/api/v1/suites/arith/versions/1", json=SUITE, headers=headers)
    assert answer.status_code == 201, answer.text


async def _report(
    client: httpx.AsyncClient, headers: dict[str, str], subject: str, statuses: list[str]
) -> dict[str, Any]:
    started = await client.post(
        "/api/v1/evaluations",
        json={
            "subject": {"digest": subject},
            "suite": {"name": "arith"},
            "mode": "gate",
            "execution_mode": "platform",
        },
        headers=headers,
    )
    assert started.status_code == 201, started.text
    evaluation = started.json()["evaluation_id"]
    cases = [
        {
            "check_id": "accuracy",
            "example_id": f"e{i}",
            "repeat": 0,
            "status": status,
            "output": {"i": i},
        }
        for i, status in enumerate(statuses)
    ]
    added = await client.post(
        f"/api/v1/evaluations/{evaluation}/cases", json={"cases": cases}, headers=headers
    )
    assert added.status_code == 200, added.text
    finished = await client.post(f"/api/v1/evaluations/{evaluation}/finish", headers=headers)
    assert finished.status_code in (200, 201), finished.text
    return dict(finished.json())


async def _gate(port: int, token: str, *args: str) -> tuple[int, str]:
    return await cli_against(port, token, "gate", *args)


def written_to(junit: Path, summary: Path) -> list[str]:
    """The gate's arguments that write its JUnit XML and its summary to these paths."""
    return ["--junit", str(junit), "--summary", str(summary)]


async def cli_against(port: int, token: str, *args: str) -> tuple[int, str]:
    """`evalbook ARGS` against the served port with a token: (exit, output)."""
    served = {"EVALBOOK_URL": f"http://127.0.0.1:{port}", "EVALBOOK_TOKEN": token}
    return await evalbook_cli(*args, env={**os.environ, **served})


async def test_exit_statuses_junit_and_summary(
    project: Project, client: httpx.AsyncClient, settings: Settings, tmp_path: Path
) -> None:
    admin = await project.admin()
    await _define(client, admin)
    passing = await _report(client, admin, "sha1:" + "1" * 40, ["pass"] * 4)
    await _report(client, admin, "sha1:" + "2" * 40, ["fail"] * 4)
    await _report(client, admin, "sha1:" + "3" * 40, ["pass"])
    assert passing["body"]["result"] == "pass"
    reader = await project.token("report.read")
    async with uvicorn_serving(create_app(settings)) as port:
        junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
        passed = ["--subject", "sha1:" + "1" * 40, "--suite", "arith"]
        code, out = await _gate(port, reader, *passed, *written_to(junit, summary))
        assert code == 0, out
        suites = list(junitparser.JUnitXml.fromfile(str(junit)))
        assert [(s.name, s.tests, s.failures) for s in suites] == [("arith", 1, 0)]
        assert "## EvalBook gate: pass" in summary.read_text()
        assert passing["report_id"][:8] in summary.read_text()

        code, out = await _gate(
            port, reader, "--subject", "sha1:" + "2" * 40, "--suite", "arith", "--junit", str(junit)
        )
        assert code == 1, out
        (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
        (case,) = list(suite)
        (failure,) = case.result
        assert isinstance(failure, junitparser.Failure)
        assert failure.message == "Failed: score 0 < threshold 0.5."
        code, out = await _gate(port, reader, "--subject", "sha1:" + "3" * 40, "--suite", "arith")
        assert code == 2 and "inconclusive" in out, out
        code, out = await _gate(port, reader, *passed, "--suite", "absent")
        assert code == 3 and "absent: missing" in out, out
        code, out = await _gate(port, reader, "--subject", "sha1:" + "4" * 40)
        assert code == 3, out
        code, out = await _gate(port, reader, *passed, "--require-assurance", "human_attested")
        assert passing["body"]["assurance"] == "platform_verified"
        assert code == 0, out
        user_report = await _report(
            client,
            {"Authorization": f"Bearer {await project.token('evaluation.write')}"},
            "sha1:" + "5" * 40,
            ["pass"] * 4,
        )
        assert user_report["body"]["assurance"] == "reported"
        code, out = await _gate(
            port,
            reader,
            "--subject",
            "sha1:" + "5" * 40,
            "--suite",
            "arith",
            "--require-assurance",
            "human_attested",
        )
        assert code == 2 and "weaker than human_attested" in out, out
        code, out = await _gate(port, "evb_not-a-token", "--subject", "sha1:" + "1" * 40)
        assert code == 77 and "HTTP 401" in out, out


async def test_the_gate_waits_for_a_report(
    project: Project, client: httpx.AsyncClient, settings: Settings
) -> None:
    admin = await project.admin()
    await _define(client, admin)
    reader = await project.token("report.read")
    async with uvicorn_serving(create_app(settings)) as port:
        waiting = asyncio.create_task(
            _gate(port, reader, "--subject", "sha1:" + "6" * 40, "--suite", "arith", "--wait", "60")
        )
        await asyncio.sleep(1.5)
        assert not waiting.done()
        await _report(client, admin, "sha1:" + "6" * 40, ["pass"] * 4)
        code, out = await waiting
    assert code == 0, out


async def test_the_client_retries_a_503_after_its_retry_after() -> None:
    answers = iter([503, 503, 200])
    app = FastAPI()

    @app.get("/flaky")
    async def flaky() -> Response:
        status = next(answers)
        headers = {"Retry-After": "1"} if status == 503 else {}
        return Response(
            b'{"ok": true}', status_code=status, headers=headers, media_type="application/json"
        )

    async with uvicorn_serving(app) as port:
        client = EvalBookClient(f"http://127.0.0.1:{port}", "evb_x")
        started = asyncio.get_running_loop().time()
        assert await asyncio.to_thread(client.request, "GET", "/flaky") == {"ok": True}
        assert asyncio.get_running_loop().time() - started >= 2.0


async def test_reasons_in_plain_words_and_files_written_on_every_exit(
    project: Project, client: httpx.AsyncClient, settings: Settings, tmp_path: Path
) -> None:
    admin = await project.admin()
    await _define(client, admin)
    await _report(client, admin, "sha1:" + "6" * 40, ["fail"] * 4)
    reader = await project.token("report.read")
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    files = written_to(junit, summary)
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await _gate(port, reader, "--subject", "sha1:" + "6" * 40, *files)
        assert code == 1, out
        assert "arith: fail (accuracy: Failed: score 0 < threshold 0.5.)" in out, out
        assert "(decision)" not in out and "already_failed" not in out
        for args, expected, text in (
            (["--subject", "not-a-digest"], 64, "a digest is ALGORITHM:HEX"),
            (["--subject", "sha1:" + "6" * 40, "--require-assurance", "best"], 64, "one of"),
        ):
            junit.unlink(missing_ok=True)
            code, out = await _gate(port, reader, *args, *files)
            assert code == expected and text in out, out
            (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
            assert suite.errors == 1 and text in summary.read_text()
        code, out = await _gate(port, "evb_not-a-token", "--subject", "sha1:" + "6" * 40, *files)
        assert code == 77 and "HTTP 401" in out, out
        (suite,) = list(junitparser.JUnitXml.fromfile(str(junit)))
        ((error,),) = [case.result for case in suite]
        assert isinstance(error, junitparser.Error) and "HTTP 401" in error.message
        assert "could not decide" in summary.read_text()
