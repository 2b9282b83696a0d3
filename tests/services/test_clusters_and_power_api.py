"""Clusters and power through the API: suite refusals, a clustered report that both bundle
verifiers prove and `--replay` recomputes, the planner and the per-report power endpoint."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from statsmodels.stats.power import NormalIndPower, TTestPower
from statsmodels.stats.proportion import proportion_effectsize

from tests.bundle_helpers import download, export, node_verify, python_verify
from tests.conftest import Project
from tests.factories import case, problem, start_evaluation
from tests.pages_helpers import sign_in

PLANNER = "/evaluations/api/power"


def clustered_dataset(two_tags_on: str | None = None) -> dict[str, Any]:
    """24 examples in 8 passages of 3; e05 also tagged lang:de."""
    examples = []
    for i in range(24):
        tags = [f"passage:{i // 3}", "lang:de" if i % 4 == 0 else "lang:en"]
        if f"e{i:02d}" == two_tags_on:
            tags.append("passage:extra")
        examples.append({"id": f"e{i:02d}", "body": {"q": i}, "tags": tags})
    return {"examples": examples}


def clustered_suite(**check: Any) -> dict[str, Any]:
    return {
        "validity_hours": 24,
        "checks": [
            {
                "check_id": "grounded",
                "scorer": {"name": "judge", "version": "1"},
                "dataset": {"name": "passages", "version": "1"},
                "aggregation": {"method": "pass_rate", "threshold": 0.5},
                "repeats": 2,
                "cluster_tag_prefix": "passage:",
                "slices": [{"name": "german", "tag": "lang:de"}],
                **check,
            }
        ],
    }


async def define(
    client: httpx.AsyncClient, headers: dict[str, str], dataset: dict[str, Any]
) -> None:
    answer = await client.put(
        "/api/v1/scorers/judge/versions/1", json={"definition": {"k": "j"}}, headers=headers
    )
    assert answer.status_code in (200, 201), answer.text
    answer = await client.put("/api/v1/datasets/passages/versions/1", json=dataset, headers=headers)
    assert answer.status_code in (200, 201), answer.text


async def test_suite_refusals_for_clusters(project: Project, client: httpx.AsyncClient) -> None:
    headers = await project.admin()
    await define(client, headers, clustered_dataset())
    for aggregation in ({"method": "all_pass"}, {"method": "min", "threshold": 0.5}):
        body = problem(
            await client.put(
                "/api/v1/suites/s/versions/1",
                json=clustered_suite(aggregation=aggregation),
                headers=headers,
            ),
            422,
        )
        assert body["errors"][0]["loc"] == ["body", "checks", 0, "cluster_tag_prefix"]
    sliced = clustered_suite(cluster_tag_prefix=None)
    sliced["checks"][0]["aggregation"] = {"method": "all_pass"}
    sliced["checks"][0]["slices"][0]["cluster_tag_prefix"] = "passage:"
    body = problem(
        await client.put("/api/v1/suites/s/versions/1", json=sliced, headers=headers), 422
    )
    assert body["errors"][0]["loc"] == ["body", "checks", 0, "slices", 0, "cluster_tag_prefix"]
    for bad in ("", 5, ["passage:"]):
        problem(
            await client.put(
                "/api/v1/suites/s/versions/1",
                json=clustered_suite(cluster_tag_prefix=bad),
                headers=headers,
            ),
            422,
        )
    answer = await client.put(
        "/api/v1/datasets/passages/versions/2",
        json=clustered_dataset(two_tags_on="e05"),
        headers=headers,
    )
    assert answer.status_code == 201, answer.text
    two = clustered_suite()
    two["checks"][0]["dataset"]["version"] = "2"
    body = problem(await client.put("/api/v1/suites/s/versions/1", json=two, headers=headers), 422)
    assert "e05" in body["detail"] and "passage:" in body["detail"]
    assert (await client.get("/api/v1/suites", headers=headers)).json()["suites"] == []


async def clustered_report(
    client: httpx.AsyncClient, headers: dict[str, str], rule: str = "threshold"
) -> dict[str, Any]:
    """A finished report of the clustered suite (whole passages pass or fail; e10 flips)."""
    await define(client, headers, clustered_dataset())
    suite = {**clustered_suite(), "decision_rule": {"rule": rule}}
    answer = await client.put("/api/v1/suites/s/versions/1", json=suite, headers=headers)
    assert answer.status_code == 201, answer.text
    content = answer.json()["content"]["checks"][0]
    assert content["cluster_tag_prefix"] == "passage:"
    assert content["slices"][0]["cluster_tag_prefix"] == "passage:"
    started = await start_evaluation(client, headers, suite="s")
    evaluation = started["evaluation_id"]
    # Passage p passes when p is even; example 10 flips between repeats.
    cases = [
        case(
            "grounded",
            f"e{i:02d}",
            r,
            "pass" if (i // 3) % 2 == 0 or (i == 10 and r == 1) else "fail",
            output={"i": i, "r": r},
        )
        for i in range(24)
        for r in range(2)
    ]
    answer = await client.post(
        f"/api/v1/evaluations/{evaluation}/cases", json={"cases": cases}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    answer = await client.post(f"/api/v1/evaluations/{evaluation}/finish", headers=headers)
    assert answer.status_code == 201, answer.text
    report: dict[str, Any] = answer.json()
    return report


async def test_a_clustered_report_is_proven_and_replayed(
    project: Project, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    headers = await project.admin()
    report = await clustered_report(client, headers)
    result = report["body"]["checks"][0]
    observed = {(o["code"], o.get("slice")): o for o in result["observations"]}
    assert observed[("clusters", None)]["count"] == 8
    assert observed[("design_effect", None)]["detail"] > 1.5  # whole passages pass or fail
    assert observed[("flaky_examples", None)]["detail"] == ["e10"]
    assert ("mde", "german") in observed and ("clusters", "german") in observed
    # Third edition: a clustered pass rate's interval is the hull with Wilson at n_eff.
    assert result["interval"]["method"] == "cluster_robust_t_wilson_hull"
    assert report["body"]["decision_rule"]["edition"] == 3

    record = await export(client, headers, report["report_id"])
    path = await download(client, headers, record["bundle_id"], tmp_path / "clustered.jsonl.gz")
    code, outcome = python_verify(path, "--replay")
    assert code == 0 and outcome["replay"].startswith("matched"), outcome
    code, outcome = node_verify(path)
    assert code == 0, outcome

    power = await client.get(
        f"/evaluations/api/reports/{report['report_id']}/power",
        params={"check": "grounded", "effect": 0.1},
        headers=headers,
    )
    assert power.status_code == 200, power.text
    answer_power = power.json()
    detail = observed[("mde", None)]["detail"]
    assert answer_power["clustered"] is True and answer_power["observed_n"] == 8
    assert answer_power["n"] == math.ceil(8 * (detail["mde"] / 0.1) ** 2 - 1e-9)
    # The threshold rule decides one run against its bar: one-sided, one sample.
    assert (answer_power["design"], answer_power["alternative"]) == ("one_sample", "larger")
    assert "t(G - 1)" in answer_power["formula"]
    sliced = await client.get(
        f"/evaluations/api/reports/{report['report_id']}/power",
        params={"check": "grounded/german", "effect": -0.2},
        headers=headers,
    )
    assert sliced.status_code == 200, sliced.text
    for params, status in (
        ({"check": "nope", "effect": 0.1}, 404),
        ({"check": "grounded/nope", "effect": 0.1}, 404),
        ({"check": "grounded", "effect": 0}, 422),
        ({"check": "grounded", "effect": "x"}, 422),
        ({"check": "grounded"}, 422),
    ):
        problem(
            await client.get(
                f"/evaluations/api/reports/{report['report_id']}/power",
                params=params,
                headers=headers,
            ),
            status,
        )
    other = await project.token("report.read")
    unknown = "00000000-0000-4000-8000-00000000abcd"
    problem(
        await client.get(
            f"/evaluations/api/reports/{unknown}/power",
            params={"check": "grounded", "effect": 0.1},
            headers={"Authorization": f"Bearer {other}"},
        ),
        404,
    )


async def test_the_planner_answers_statsmodels_numbers(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = {"Authorization": f"Bearer {await project.token('report.read')}"}
    answer = await client.post(
        PLANNER, json={"method": "pass_rate", "baseline": 0.7, "effect": 0.05}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    h = abs(proportion_effectsize(0.75, 0.7))
    expected = NormalIndPower().solve_power(h, alpha=0.05, power=0.8, alternative="larger")
    assert (
        answer.json()["n"] == math.ceil(expected) and "NormalIndPower" in answer.json()["formula"]
    )
    answer = await client.post(
        PLANNER,
        json={"method": "paired", "baseline": 1.0, "effect": 0.25, "alpha": 0.01, "power": 0.9},
        headers=headers,
    )
    expected = TTestPower().solve_power(0.25, alpha=0.01, power=0.9, alternative="larger")
    assert answer.json()["n"] == math.ceil(expected)
    answer = await client.post(
        PLANNER,
        json={"method": "mean", "baseline": 0.2, "effect": 0.05, "design_effect": 1.5},
        headers=headers,
    )
    expected = NormalIndPower().solve_power(0.25, alpha=0.05, power=0.8, alternative="larger")
    assert answer.json()["n"] == math.ceil(expected * 1.5 - 1e-9)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"effect": 0}, "effect"),
        ({"alpha": 0}, "alpha"),
        ({"alpha": 0.6}, "alpha"),
        ({"power": 0}, "power"),
        ({"power": 1}, "power"),
        ({"baseline": 1.0}, "baseline"),
        ({"effect": 0.5}, "effect"),
        ({"method": "median"}, "method"),
        ({"effect": "big"}, "effect"),
        ({"effect": None}, "effect"),
        ({"correlation": 0.5}, "correlation"),
        ({"design_effect": 0.5}, "design_effect"),
        ({"extra": 1}, "extra"),
    ],
)
async def test_planner_refusals_name_the_field(
    project: Project, client: httpx.AsyncClient, change: dict[str, Any], field: str
) -> None:
    headers = {"Authorization": f"Bearer {await project.token('report.read')}"}
    body = {"method": "pass_rate", "baseline": 0.7, "effect": 0.05, **change}
    refused = problem(await client.post(PLANNER, json=body, headers=headers), 422)
    assert any(field in [str(p) for p in e["loc"]] for e in refused["errors"]), refused


async def test_planner_edge_cases(project: Project, client: httpx.AsyncClient) -> None:
    reader = {"Authorization": f"Bearer {await project.token('report.read')}"}
    good = {"method": "pass_rate", "baseline": 0.7, "effect": 0.05}
    problem(await client.post(PLANNER, json=good), 401)
    writer = {"Authorization": f"Bearer {await project.token('evaluation.write')}"}
    problem(await client.post(PLANNER, json=good, headers=writer), 403)
    problem(
        await client.post(
            PLANNER,
            content=b'{"method": "mean", "method": "pass_rate", "baseline": 0.7, "effect": 0.05}',
            headers={**reader, "Content-Type": "application/json"},
        ),
        422,
    )
    problem(
        await client.post(
            PLANNER,
            content=b'{"method": "mean", "baseline": NaN, "effect": 0.05}',
            headers={**reader, "Content-Type": "application/json"},
        ),
        422,
    )
    problem(
        await client.post(
            PLANNER,
            content=b"{" + b'"x": "' + b"a" * (40 << 20) + b'"}',
            headers={**reader, "Content-Type": "application/json"},
        ),
        413,
    )
    problem(await client.post(PLANNER, json={"method": "mean"}, headers=reader), 422)


async def test_the_report_page_shows_clusters_power_and_flaky_examples(
    project: Project, other_project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    headers = await project.admin()
    report = await clustered_report(client, headers, rule="interval")
    result = report["body"]["checks"][0]
    assert result["status"] == "inconclusive", result["explanation"]
    underpowered = next(o for o in result["observations"] if o["code"] == "underpowered")
    assert "underpowered" in result["explanation"]
    report_id = report["report_id"]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as browser:
        await sign_in(browser, await project.token("report.read"))
        page = await browser.get(f"/reports/{report_id}")
        assert page.status_code == 200, page.text
        assert "8 clusters" in page.text and "design effect" in page.text
        more = underpowered["detail"]["n_needed"] - underpowered["detail"]["n"]
        assert f"would need about {more} more clusters" in page.text
        assert "pass^k" in page.text and "1 flaky example" in page.text
        link = f"/reports/{report_id}/checks/grounded/examples/e10"
        assert f'href="{link}"' in page.text
        cases = await browser.get(link)
        assert cases.status_code == 200
        assert cases.text.count('<tr><td class="num">') == 2
        assert (
            await browser.get(f"/reports/{report_id}/checks/nope/examples/e10")
        ).status_code == 404
        assert (
            await browser.get(f"/reports/{report_id}/checks/grounded/examples/zz")
        ).status_code == 404
        await sign_in(browser, await other_project.token("report.read"))
        assert (await browser.get(link)).status_code == 404
