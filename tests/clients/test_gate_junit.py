"""The gate's JUnit XML against the JUnit schema Jenkins reads (the xunit plugin's junit-10.xsd,
as pytest's source distribution carries it; `make junit-schema` and .ci/run fetch it, pinned
by hash) and junitparser: a failure per failed required check with its why-text, an error per
required check in error, a skipped entry per inconclusive check and per optional check that
did not pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import junitparser
from lxml import etree

from app.cli.gate import decide, junit
from tests.conftest import REPO, Project

SCHEMA = REPO / ".cache" / "junit-10.xsd"
CHECKS = [
    {"check_id": "strict", "threshold": 0.9},
    {"check_id": "optional", "threshold": 0.9, "required": False},
    {"check_id": "thin", "threshold": 0.5},
]


def schema() -> etree.XMLSchema:
    """The Jenkins JUnit schema, as fetched for the tests."""
    assert SCHEMA.exists(), "make junit-schema (and .ci/run) fetches the pinned JUnit schema"
    return etree.XMLSchema(etree.parse(str(SCHEMA)))


async def _mixed_report(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    """A report whose required check fails, optional check fails, and third check lacks half
    its cases."""
    await client.put("/api/v1/scorers/exact/versions/1", json={"definition": {}}, headers=headers)
    examples = [{"id": f"e{i}", "body": {}, "tags": []} for i in range(4)]
    await client.put(
        "/api/v1/datasets/four/versions/1", json={"examples": examples}, headers=headers
    )
    checks = [
        {
            "check_id": c["check_id"],
            "required": c.get("required", True),
            "scorer": {"name": "exact", "version": "1"},
            "dataset": {"name": "four", "version": "1"},
            "aggregation": {"method": "pass_rate", "threshold": c["threshold"]},
        }
        for c in CHECKS
    ]
    suite = {"validity_hours": 24, "checks": checks}
    assert (
        await client.put("/api/v1/suites/mixed/versions/1", json=suite, headers=headers)
    ).status_code == 201
    start = {
        "subject": {"digest": "sha1:" + "7" * 40},
        "suite": {"name": "mixed"},
        "mode": "gate",
        "execution_mode": "platform",
    }
    evaluation = (await client.post("/api/v1/evaluations", json=start, headers=headers)).json()[
        "evaluation_id"
    ]
    statuses = {
        "strict": ["pass", "pass", "fail", "fail"],
        "optional": ["fail"] * 4,
        "thin": ["pass", "pass"],
    }
    cases = [
        {"check_id": check, "example_id": f"e{i}", "repeat": 0, "status": s, "output": {"i": i}}
        for check, listed in statuses.items()
        for i, s in enumerate(listed)
    ]
    added = await client.post(
        f"/api/v1/evaluations/{evaluation}/cases", json={"cases": cases}, headers=headers
    )
    assert added.status_code == 200, added.text
    finished = await client.post(f"/api/v1/evaluations/{evaluation}/finish", headers=headers)
    assert finished.status_code == 201, finished.text
    return dict(finished.json())


async def test_the_gates_junit_meets_the_schema_and_places_each_check(
    project: Project, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    report = await _mixed_report(client, await project.admin())
    results = {c["check_id"]: (c["result"], c["required"]) for c in report["body"]["checks"]}
    gate = decide("sha1:" + "7" * 40, [report], None, None)
    written = junit(gate)
    schema().assertValid(etree.fromstring(written))
    path = tmp_path / "junit.xml"
    path.write_bytes(written)
    (suite,) = list(junitparser.JUnitXml.fromfile(str(path)))
    placed = {case.name: case.result for case in suite}
    explanations = {c["check_id"]: c["explanation"] for c in report["body"]["checks"]}
    (failure,) = placed["strict"]
    assert isinstance(failure, junitparser.Failure) and failure.message == explanations["strict"]
    (skipped,) = placed["optional"]
    assert isinstance(skipped, junitparser.Skipped) and "not required" in skipped.message
    assert results["thin"][0] == "inconclusive"
    (inconclusive,) = placed["thin"]
    assert isinstance(inconclusive, junitparser.Skipped)
    assert inconclusive.message.startswith("inconclusive: ")
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (3, 1, 0, 2)
