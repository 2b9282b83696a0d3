"""A report as a model card's model-index and as a CycloneDX ML-BOM (docs/exports.md), each
read back by the format's own library: huggingface_hub's `model_index_to_eval_results` and
cyclonedx-python-lib's strict JSON validator (CycloneDX 1.6) and deserializer."""

from __future__ import annotations

import json
from typing import Any

import httpx
import yaml
from cyclonedx.model.bom import Bom
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from huggingface_hub.repocard_data import model_index_to_eval_results

from tests.conftest import Project
from tests.factories import define_suite, finished, first_report, problem

SUBJECT = {"digest": "sha1:" + "5c" * 20, "name": "acme/summarizer"}


def url(report_id: str, export_format: str) -> str:
    return f"/evaluations/api/reports/{report_id}/exports/{export_format}"


async def exported(
    project: Project, client: httpx.AsyncClient, export_format: str
) -> tuple[Any, httpx.Response]:
    """A report of the standard suite about SUBJECT, and its export in `export_format`."""
    headers = await project.admin()
    await define_suite(client, headers)
    report = await finished(client, headers, subject=SUBJECT)
    answer = await client.get(url(report["report_id"], export_format), headers=headers)
    assert answer.status_code == 200, answer.text
    return report, answer


async def test_model_index_reads_back_to_the_reports_numbers(
    project: Project, client: httpx.AsyncClient
) -> None:
    report, answer = await exported(project, client, "model-index")
    assert answer.headers["content-type"].startswith("application/yaml")
    document = yaml.safe_load(answer.text)
    name, results = model_index_to_eval_results(document["model-index"])
    assert name == "acme/summarizer"
    body = report["body"]
    scored = [c for c in body["checks"] if c["score"] is not None]
    assert len(results) == len(scored) >= 2
    suite = body["suite_ref"]
    for check, result in zip(scored, results, strict=True):
        assert result.metric_name == check["check_id"]
        assert result.metric_type == f"evalbook/{check['aggregation']['method']}"
        assert result.metric_value == check["score"]
        assert result.verified is False
        assert result.task_type == suite["name"]
        assert (result.dataset_name, result.dataset_revision) == ("qa", "1")
        assert result.source_url == report["envelope"]["url"]
        assert result.source_name == f"EvalBook report {report['report_id']}"
        assert result.metric_args["result"] == check["result"]
        assert result.metric_args.get("interval") == check["interval"]


async def test_cyclonedx_validates_strictly_and_carries_every_metric(
    project: Project, client: httpx.AsyncClient
) -> None:
    report, answer = await exported(project, client, "cyclonedx")
    assert answer.headers["content-type"] == "application/vnd.cyclonedx+json; version=1.6"
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(answer.text) is None
    parsed = Bom.from_json(json.loads(answer.text))  # type: ignore[attr-defined]
    (component,) = parsed.components
    assert component.name == "acme/summarizer"
    assert [(h.alg.value, h.content) for h in component.hashes] == [("SHA-1", "5c" * 20)]
    document = answer.json()
    metrics = document["components"][0]["modelCard"]["quantitativeAnalysis"]["performanceMetrics"]
    expected = []
    for check in report["body"]["checks"]:
        groups = [(check["check_id"], check)] + [
            (f"{check['check_id']}/{s['name']}", s) for s in check["slices"]
        ]
        for name, group in groups:
            if group["score"] is not None:
                expected.append((name, check["aggregation"]["method"], group))
    assert [m["slice"] for m in metrics] == [name for name, _, _ in expected]
    for metric, (_, method, group) in zip(metrics, expected, strict=True):
        assert metric["type"] == method
        assert float(metric["value"]) == group["score"]
        interval = group["interval"]
        if interval is not None:
            bounds = metric["confidenceInterval"]
            assert (float(bounds["lowerBound"]), float(bounds["upperBound"])) == (
                interval["lower"],
                interval["upper"],
            )
    references = document["components"][0]["externalReferences"]
    assert references[0]["url"] == report["envelope"]["url"]
    assert references[0]["hashes"][0]["content"] == report["digest"].removeprefix("sha256:")


async def test_exports_refuse_what_they_should(
    project: Project, other_project: Project, client: httpx.AsyncClient
) -> None:
    headers, report = await first_report(project, client)
    unknown = problem(await client.get(url(report["report_id"], "spdx"), headers=headers), 422)
    assert "'model-index'" in unknown["detail"] and "'cyclonedx'" in unknown["detail"], unknown
    for export_format in ("model-index", "cyclonedx"):
        path = url(report["report_id"], export_format)
        problem(await client.get(path), 401)
        writer = {"Authorization": f"Bearer {await project.token('evaluation.write')}"}
        problem(await client.get(path, headers=writer), 403)
        problem(await client.get(path, headers=await other_project.admin()), 404)
        missing = url("00000000-0000-4000-8000-000000000000", export_format)
        problem(await client.get(missing, headers=headers), 404)
        reader = {"Authorization": f"Bearer {await project.token('report.read')}"}
        assert (await client.get(path, headers=reader)).status_code == 200
