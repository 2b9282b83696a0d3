"""`evalbook export` against a served process: each format written to a file (and one to
stdout), read back by its own library, and the CLI's exit statuses and --json errors."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import httpx
import junitparser
import orjson
import yaml
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from huggingface_hub.repocard_data import model_index_to_eval_results

from app.api.main import create_app
from app.domain import exits
from app.platform.config import Settings
from tests.conftest import Project
from tests.factories import evalbook_cli, first_report
from tests.served import uvicorn_serving

MISSING = "00000000-0000-4000-8000-000000000000"


async def export(port: int, token: str, *args: str) -> tuple[int, str]:
    """`evalbook export ARGS` against the served port: (exit, output)."""
    served = {"EVALBOOK_URL": f"http://127.0.0.1:{port}", "EVALBOOK_TOKEN": token}
    return await evalbook_cli("export", *args, env={**os.environ, **served})


async def test_every_format_is_written_and_reads_back(
    project: Project, client: httpx.AsyncClient, settings: Settings, tmp_path: Path
) -> None:
    _, report = await first_report(project, client)
    report_id = report["report_id"]
    reader = await project.token("report.read")
    async with uvicorn_serving(create_app(settings)) as port:
        written = {}
        for export_format in ("test-result", "model-index", "cyclonedx", "junit"):
            path = tmp_path / export_format
            code, out = await export(
                port, reader, report_id, "--format", export_format, "-o", str(path)
            )
            assert code == exits.OK, out
            written[export_format] = path.read_bytes()
        code, out = await export(port, reader, report_id, "--format", "model-index")
        assert code == exits.OK and out.encode() == written["model-index"]

    statement = orjson.loads(base64.b64decode(orjson.loads(written["test-result"])["payload"]))
    assert statement["predicateType"] == "https://in-toto.io/attestation/test-result/v0.1"
    _, results = model_index_to_eval_results(yaml.safe_load(written["model-index"])["model-index"])
    assert {r.metric_name for r in results} <= {c["check_id"] for c in report["body"]["checks"]}
    validator = JsonStrictValidator(SchemaVersion.V1_6)
    assert validator.validate_str(written["cyclonedx"].decode()) is None
    (tmp_path / "junit.xml").write_bytes(written["junit"])
    (suite,) = list(junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml")))
    assert suite.tests == len(report["body"]["checks"])


async def test_export_exit_statuses_and_json_errors(
    project: Project, client: httpx.AsyncClient, settings: Settings
) -> None:
    _, report = await first_report(project, client)
    reader = await project.token("report.read")
    writer = await project.token("evaluation.write")
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await export(port, reader, MISSING, "--format", "cyclonedx", "--json")
        assert code == exits.NOT_FOUND, out
        error = json.loads(out.strip().splitlines()[-1])
        assert error["exit"] == exits.NOT_FOUND and error["http_status"] == 404
        assert "no such report" in error["error"]
        code, out = await export(port, writer, report["report_id"], "--format", "junit")
        assert code == exits.NO_PERMISSION, out
        code, out = await export(port, reader, "not-an-id", "--format", "junit")
        assert code == exits.USAGE and "is not a report id" in out, out
        code, out = await export(port, reader, report["report_id"], "--format", "spdx")
        assert code == exits.USAGE and "'model-index'" in out, out
