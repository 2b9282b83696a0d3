"""Clients generated from the served OpenAPI document by generators we did not write, pinned in
the test lock: openapi-python-client (Python) generates every operation and every schema with
no warning, and its client drives the quickstart's path against a served process;
openapi-typescript (TypeScript, tests/clients/typescript) generates the types, which
type-check a call made with openapi-fetch."""

from __future__ import annotations

import gzip
import importlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from app.api.main import create_app
from app.bundles.verify import verify_file
from app.platform.config import Settings
from tests.conftest import REPO, Project
from tests.served import uvicorn_serving

# Vendor media types the generator does not know are bytes to it (its documented setting).
GENERATOR_CONFIG = """\
package_name_override: evalbook_client
content_type_overrides:
  application/x-ndjson: application/octet-stream
  application/vnd.evalbook.bundle.v1+jsonl.gzip: application/octet-stream
"""
TYPESCRIPT = REPO / "tests" / "clients" / "typescript"
SUBJECT = "sha1:4f1c0a7e9b2d3c5e6f708192a3b4c5d6e7f80912"


def test_operation_ids_are_short_and_unique(settings: Settings) -> None:
    document = create_app(settings).openapi()
    ids = [op["operationId"] for path in document["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))
    assert {"start_evaluation", "add_cases", "finish_evaluation", "for_subject"} <= set(ids)


def test_free_form_json_is_an_unconstrained_value(settings: Settings) -> None:
    document = create_app(settings).openapi()
    schemas = document["components"]["schemas"]
    assert "JSONValue" not in schemas
    # `output` may be absent or null: the unconstrained value beside null.
    output = schemas["CaseIn"]["properties"]["output"]["anyOf"][0]
    assert set(output) == {"description"} and "I-JSON" in output["description"]
    assert set(schemas["ExampleIn"]["properties"]["body"]) <= {"description", "title"}
    cases = document["paths"]["/api/v1/evaluations/{evaluation_id}/cases"]["post"]
    assert list(cases["requestBody"]["content"]) == ["application/json", "application/x-ndjson"]


def generate_python_client(document: dict[str, Any], into: Path) -> str:
    """Run openapi-python-client on the document; what it printed."""
    (into / "openapi.json").write_text(json.dumps(document))
    (into / "config.yaml").write_text(GENERATOR_CONFIG)
    venv_bin = Path(sys.executable).parent
    run = subprocess.run(
        [
            str(venv_bin / "openapi-python-client"),
            "generate",
            "--path",
            str(into / "openapi.json"),
            "--output-path",
            str(into / "evalbook_client"),
            "--meta",
            "none",
            "--config",
            str(into / "config.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        # Its post-generation hooks run ruff, found on the PATH.
        env={"PATH": f"{venv_bin}:/usr/bin:/bin", "HOME": str(into)},
        check=False,
    )
    printed = run.stdout + run.stderr
    assert run.returncode == 0, printed
    return printed


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[Path]:
    """A folder the generated package is importable from, removed from the imports after."""
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == "evalbook_client"]:
            del sys.modules[name]


def client_module(name: str) -> ModuleType:
    """A module of the generated package."""
    return importlib.import_module(f"evalbook_client.{name}")


async def test_the_generated_python_client_runs_the_quickstart(
    settings: Settings, project: Project, generated: Path
) -> None:
    token = await project.token("admin", kind="runner", assurance="reported")
    app = create_app(settings)
    async with uvicorn_serving(app) as port:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            document = (await http.get("/openapi.json")).json()
        printed = generate_python_client(document, generated)
        # Nothing dropped: the generator warns for every operation or schema it leaves out.
        assert "Warning" not in printed and "WARNING" not in printed, printed
        generated_ops = {p.stem for p in (generated / "evalbook_client" / "api").rglob("*.py")}
        ids = {op["operationId"] for path in document["paths"].values() for op in path.values()}
        assert ids <= generated_ops, ids - generated_ops
        await drive_quickstart(f"http://127.0.0.1:{port}", token, generated)


async def drive_quickstart(base: str, token: str, folder: Path) -> None:
    """Definitions, an evaluation, cases (JSON and NDJSON), finish, the report, forSubject and
    a bundle, every call through the generated client."""
    client_api = client_module("client")
    models = client_module("models")
    types = client_module("types")
    api = {
        name: client_module(f"api.{group}.{name}")
        for group, name in [
            ("definitions", "put_scorer"),
            ("definitions", "put_dataset"),
            ("definitions", "put_suite_version"),
            ("evaluations", "start_evaluation"),
            ("evaluations", "add_cases"),
            ("evaluations", "finish_evaluation"),
            ("reports", "get_report"),
            ("reports", "for_subject"),
            ("bundles", "export_bundle"),
            ("bundles", "bundle_content"),
        ]
    }
    async with client_api.AuthenticatedClient(base_url=base, token=token) as client:
        scorer = await api["put_scorer"].asyncio_detailed(
            "exact-match",
            "1",
            client=client,
            body=models.ScorerVersionIn.from_dict({"definition": {"kind": "exact"}}),
        )
        assert scorer.status_code == 201, scorer.content
        examples = [
            {"id": f"q{i}", "body": {"q": f"{i}+{i}"}, "tags": ["lang:en"]} for i in range(1, 5)
        ]
        dataset = await api["put_dataset"].asyncio_detailed(
            "arithmetic",
            "1",
            client=client,
            body=models.DatasetVersionIn.from_dict({"examples": examples}),
        )
        assert dataset.status_code == 201, dataset.content
        check = {
            "check_id": "accuracy",
            "scorer": {"name": "exact-match", "version": "1"},
            "dataset": {"name": "arithmetic", "version": "1"},
            "aggregation": {"method": "pass_rate", "threshold": 0.5},
        }
        suite = await api["put_suite_version"].asyncio_detailed(
            "arithmetic",
            "1",
            client=client,
            body=models.SuiteVersionIn.from_dict({"validity_hours": 24, "checks": [check]}),
        )
        assert suite.status_code == 201, suite.content
        start = models.EvaluationStartIn.from_dict(
            {
                "subject": {"digest": SUBJECT, "repo": "acme/calc"},
                "suite": {"name": "arithmetic"},
                "mode": "gate",
                "execution_mode": "external",
            }
        )
        started = await api["start_evaluation"].asyncio(client=client, body=start)
        assert isinstance(started, models.EvaluationStartOut), started
        evaluation_id = started.evaluation_id
        case = {"check_id": "accuracy", "repeat": 0, "output": {"answer": "x"}}
        batch = models.CaseBatchIn.from_dict(
            {"cases": [{**case, "example_id": "q1", "status": "pass"}]}
        )
        added = await api["add_cases"].asyncio(evaluation_id, client=client, body=batch)
        assert isinstance(added, models.CaseBatchOut), added
        lines = "".join(
            json.dumps({**case, "example_id": f"q{i}", "status": "pass" if i < 4 else "fail"})
            + "\n"
            for i in range(2, 5)
        )
        streamed = await api["add_cases"].asyncio(
            evaluation_id, client=client, body=types.File(payload=lines.encode())
        )
        assert isinstance(streamed, models.CaseBatchOut), streamed
        report = await api["finish_evaluation"].asyncio(evaluation_id, client=client)
        assert isinstance(report, models.ReportOut), report
        assert report.body.result.value == "pass"
        assert report.body.checks[0].coverage.executed == 4
        again = await api["get_report"].asyncio(report.report_id, client=client)
        assert isinstance(again, models.ReportOut) and again.digest == report.digest
        current = await api["for_subject"].asyncio(client=client, digest=SUBJECT)
        assert [r.report_id for r in current.reports] == [report.report_id]
        bundle = await api["export_bundle"].asyncio(
            client=client, body=models.BundleIn.from_dict({"report_id": str(report.report_id)})
        )
        assert isinstance(bundle, models.BundleOut), bundle
        content = await api["bundle_content"].asyncio(bundle.bundle_id, client=client)
        assert isinstance(content, types.File)
        stored = content.payload.read()
        (folder / "bundle.jsonl.gz").write_bytes(stored)
        assert gzip.decompress(stored).startswith(b"{")
        assert verify_file(folder / "bundle.jsonl.gz").ok


async def test_openapi_typescript_generates_types_that_check(
    settings: Settings, tmp_path: Path
) -> None:
    tools = TYPESCRIPT / "node_modules" / ".bin"
    assert shutil.which("node"), "Node.js 18 or newer is needed (README, running the tests)"
    assert (tools / "openapi-typescript").exists(), (
        "npm ci --prefix tests/clients/typescript installs the pinned generator (make test and"
        " .ci/run do)"
    )
    async with uvicorn_serving(create_app(settings)) as port, httpx.AsyncClient() as http:
        served = await http.get(f"http://127.0.0.1:{port}/openapi.json")
    (tmp_path / "openapi.json").write_bytes(served.content)
    printed = node_tool(tmp_path, "openapi-typescript", "openapi.json", "-o", "schema.d.ts")
    assert "warn" not in printed.lower(), printed
    schema = (tmp_path / "schema.d.ts").read_text()
    for name in ("CaseIn", "CaseBatchIn", "ExampleIn", "EvaluationStartIn", "ReportOut"):
        assert f"{name}: {{" in schema, name
    shutil.copy(TYPESCRIPT / "uses_the_types.ts", tmp_path / "uses_the_types.ts")
    (tmp_path / "node_modules").symlink_to(TYPESCRIPT / "node_modules")
    strict = ["--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext"]
    node_tool(tmp_path, "tsc", *strict, "--target", "es2022", "uses_the_types.ts")


def node_tool(folder: Path, tool: str, *args: str) -> str:
    """Run one of the pinned Node tools in `folder`; what it printed (it must succeed)."""
    run = subprocess.run(
        [str(TYPESCRIPT / "node_modules" / ".bin" / tool), *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout + run.stderr
