"""The second edition through the API: re-evaluation spending counted per subject and suite
(raced for real), min_clusters frozen with the suite, the planner's designs, the page and a
bundle that replays its look."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from statsmodels.stats.power import NormalIndPower, TTestPower
from statsmodels.stats.proportion import proportion_effectsize

from tests.bundle_helpers import download, export, python_verify
from tests.conftest import Project
from tests.factories import define_suite, problem, run_cases, start_evaluation, suite_body
from tests.pages_helpers import sign_in
from tests.services.test_clusters_and_power_api import (
    PLANNER,
    clustered_dataset,
    clustered_suite,
    define,
)

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

OTHER_SUBJECT = {"digest": "sha1:" + "f" * 40, "repo": "acme/web"}


def spending_suite() -> dict[str, Any]:
    """The factories' suite, deciding by intervals, spending alpha over re-evaluations."""
    body = suite_body(rule="interval")
    body["reevaluation_spending"] = "geometric"
    return body


async def finish(
    client: httpx.AsyncClient, headers: dict[str, str], evaluation_id: str
) -> dict[str, Any]:
    response = await client.post(f"/api/v1/evaluations/{evaluation_id}/finish", headers=headers)
    assert response.status_code == 201, response.text
    report: dict[str, Any] = response.json()
    return report


async def finished(client: httpx.AsyncClient, headers: dict[str, str], **start: Any) -> Any:
    evaluation = await start_evaluation(client, headers, **start)
    await run_cases(client, headers, evaluation["evaluation_id"])
    return await finish(client, headers, evaluation["evaluation_id"])


async def test_each_gate_report_of_a_subject_is_the_next_look(
    project: Project, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    headers = await project.admin()
    frozen = await define_suite(client, headers, body=spending_suite())
    assert frozen["content"]["reevaluation_spending"] == "geometric"
    looks = []
    for _ in range(3):
        rule = (await finished(client, headers))["body"]["decision_rule"]
        looks.append((rule["look"], rule["alpha_spent"], rule["alpha_next"]))
    assert looks == [(1, 0.04, 0.008), (2, 0.008, 0.0016), (3, 0.0016, 0.00032)]
    # Another subject starts its own chain; an experiment spends nothing.
    other = await finished(client, headers, subject=OTHER_SUBJECT)
    assert other["body"]["decision_rule"]["look"] == 1
    experiment = await finished(client, headers, mode="experiment")
    assert "look" not in experiment["body"]["decision_rule"]
    # Any version of the suite continues the chain, whatever the earlier results were.
    response = await client.put(
        "/api/v1/suites/rag/versions/2", json=spending_suite(), headers=headers
    )
    assert response.status_code == 201, response.text
    activated = await client.post("/api/v1/suites/rag/versions/2/activate", headers=headers)
    assert activated.status_code == 200, activated.text
    fourth = await finished(client, headers)
    assert fourth["body"]["decision_rule"]["look"] == 4
    # The bundle replays the report at its look.
    record = await export(client, headers, fourth["report_id"])
    path = await download(client, headers, record["bundle_id"], tmp_path / "look.jsonl.gz")
    code, outcome = python_verify(path, "--replay")
    assert code == 0 and outcome["replay"].startswith("matched"), outcome


async def test_racing_finishes_of_one_subject_take_distinct_looks(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=spending_suite())
    evaluations = [await start_evaluation(client, headers) for _ in range(6)]
    for evaluation in evaluations:
        await run_cases(client, headers, evaluation["evaluation_id"])
    reports = await asyncio.gather(
        *(finish(client, headers, e["evaluation_id"]) for e in evaluations)
    )
    looks = sorted(r["body"]["decision_rule"]["look"] for r in reports)
    assert looks == [1, 2, 3, 4, 5, 6]
    # The look follows the issuing order.
    by_time = sorted(reports, key=lambda r: r["body"]["issued_at"])
    assert [r["body"]["decision_rule"]["look"] for r in by_time] == looks


async def test_the_page_shows_the_look_and_too_few_clusters(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=spending_suite())
    await finished(client, headers)
    second = await finished(client, headers)
    await define(client, headers, clustered_dataset())
    few = clustered_suite(min_clusters=10)
    response = await client.put("/api/v1/suites/s/versions/1", json=few, headers=headers)
    assert response.status_code == 201, response.text
    assert response.json()["content"]["checks"][0]["min_clusters"] == 10
    evaluation = await start_evaluation(client, headers, suite="s")
    cases = [
        {"check_id": "grounded", "example_id": f"e{i:02d}", "repeat": r, "status": "pass"}
        for i in range(24)
        for r in range(2)
    ]
    answer = await client.post(
        f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases",
        json={"cases": cases},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    clustered = await finish(client, headers, evaluation["evaluation_id"])
    result = clustered["body"]["checks"][0]
    assert result["status"] == "inconclusive" and clustered["body"]["reasons"][0]["step"] == (
        "too_few_clusters"
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as browser:
        await sign_in(browser, await project.token("report.read"))
        page = await browser.get(f"/reports/{second['report_id']}")
        assert page.status_code == 200
        assert "look 2 at this subject" in page.text and "α spent = 0.008" in page.text
        # Third edition: the MDE is at the next look's alpha, and the page says so.
        assert "at the next look's α = 0.0016" in page.text
        page = await browser.get(f"/reports/{clustered['report_id']}")
        assert "Too few clusters: G = 8, fewer than the minimum of 10" in page.text
        assert "falls in 8 clusters" in page.text or "fall in 8 clusters" in page.text


async def test_suite_refusals_for_the_second_edition(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define(client, headers, clustered_dataset())
    unclustered = clustered_suite(cluster_tag_prefix=None, min_clusters=3)
    unclustered["checks"][0]["slices"] = []
    for body, loc in (
        (unclustered, ["body", "checks", 0, "min_clusters"]),
        (clustered_suite(min_clusters=1), ["body", "checks", 0, "min_clusters"]),
        (clustered_suite(min_clusters=2.5), ["body", "checks", 0, "min_clusters"]),
        (clustered_suite(min_clusters="5"), ["body", "checks", 0, "min_clusters"]),
        (
            {**clustered_suite(), "reevaluation_spending": "linear"},
            ["body", "reevaluation_spending"],
        ),
        ({**clustered_suite(), "reevaluation_spending": None}, ["body", "reevaluation_spending"]),
    ):
        refused = problem(
            await client.put("/api/v1/suites/s/versions/1", json=body, headers=headers), 422
        )
        assert any(e["loc"][: len(loc)] == loc for e in refused["errors"]), refused
    assert (await client.get("/api/v1/suites", headers=headers)).json()["suites"] == []
    # A suite that names neither freezes (and digests) as before.
    plain = await client.put("/api/v1/suites/s/versions/1", json=clustered_suite(), headers=headers)
    content = plain.json()["content"]
    assert "reevaluation_spending" not in content and "min_clusters" not in content["checks"][0]


async def test_the_planner_takes_a_design_and_an_alternative(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = {"Authorization": f"Bearer {await project.token('report.read')}"}
    one = await client.post(
        PLANNER,
        json={"method": "pass_rate", "baseline": 0.7, "effect": 0.05, "design": "one_sample"},
        headers=headers,
    )
    assert one.status_code == 200, one.text
    h = abs(proportion_effectsize(0.75, 0.7))
    expected = NormalIndPower().solve_power(h, alpha=0.05, power=0.8, ratio=0, alternative="larger")
    assert one.json()["n"] == math.ceil(expected) and "ratio=0" in one.json()["formula"]
    two = await client.post(
        PLANNER,
        json={"method": "mean", "baseline": 1.0, "effect": 0.2, "alternative": "two-sided"},
        headers=headers,
    )
    expected = NormalIndPower().solve_power(0.2, alpha=0.05, power=0.8, alternative="two-sided")
    assert two.json()["n"] == math.ceil(expected) and "two-sided" in two.json()["formula"]
    paired = await client.post(
        PLANNER,
        json={"method": "mean", "baseline": 1.0, "effect": 0.2, "design": "paired"},
        headers=headers,
    )
    # Third edition: no correlation stated is 0, the differences' sd is sd * sqrt(2), and the
    # answer says which correlation it assumed.
    expected = TTestPower().solve_power(
        0.2 / math.sqrt(2), alpha=0.05, power=0.8, alternative="larger"
    )
    assert paired.json()["n"] == math.ceil(expected) and paired.json()["correlation"] == 0.0
    stated = await client.post(
        PLANNER,
        json={
            "method": "mean",
            "baseline": 1.0,
            "effect": 0.2,
            "design": "paired",
            "correlation": 0.5,
        },
        headers=headers,
    )
    expected = TTestPower().solve_power(0.2, alpha=0.05, power=0.8, alternative="larger")
    assert stated.json()["n"] == math.ceil(expected) and stated.json()["correlation"] == 0.5
    for change, field in (
        ({"method": "paired", "baseline": 1.0, "design": "one_sample"}, "design"),
        ({"correlation": 0.5, "design": "one_sample"}, "correlation"),
        ({"design": "crossover"}, "design"),
        ({"alternative": "smaller"}, "alternative"),
        ({"design": 3}, "design"),
    ):
        body = {"method": "pass_rate", "baseline": 0.7, "effect": 0.05, **change}
        refused = problem(await client.post(PLANNER, json=body, headers=headers), 422)
        assert any(field in [str(p) for p in e["loc"]] for e in refused["errors"]), refused


async def test_spending_under_the_threshold_rule_is_refused(
    project: Project, client: httpx.AsyncClient
) -> None:
    """Third edition: spending cannot act on a point-estimate rule, so it is refused."""
    headers = await project.admin()
    await define_suite(client, headers)
    body = suite_body(rule="threshold")
    body["reevaluation_spending"] = "geometric"
    refused = problem(
        await client.put("/api/v1/suites/spent/versions/1", json=body, headers=headers), 422
    )
    assert "threshold" in str(refused) and "reevaluation_spending" in str(refused)
    response = await client.get("/api/v1/suites/spent", headers=headers)
    assert response.status_code == 404
