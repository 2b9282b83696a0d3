"""Measures through the service (docs/verdicts.md, section 12): suites with measure checks,
cases carrying measures on every ingestion lane, reports deciding them, bundles both
verifiers prove and replay, and the refusals of bad input that leave nothing behind."""

from __future__ import annotations

import copy
import gzip
import html
import math
import re
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from fastapi import FastAPI
from sqlalchemy import text

from app.cli.gate import decide, summary
from app.digest.merkle import case_leaf
from app.domain.measure_text import measure_sentence
from tests.bundle_helpers import download, export, lines_of, node_verify, python_verify
from tests.bundles.edits import edit, reseal
from tests.conftest import Project
from tests.factories import case, define_suite, problem, start_evaluation, suite_body
from tests.pages_helpers import sign_in

LATENCY = {
    "check_id": "latency-p95",
    "measure": {"of": "accuracy", "name": "latency_ms"},
    "aggregation": {"method": "quantile", "q": 0.95, "threshold": 2000, "better": "lower"},
}
COST = {
    "check_id": "cost",
    "measure": {"of": "accuracy", "name": "cost_usd"},
    "aggregation": {
        "method": "mean",
        "threshold": 0.01,
        "better": "lower",
        "margin_relative": 0.3,
    },
}


def measured_suite(rule: str = "threshold", *extra: dict[str, Any]) -> dict[str, Any]:
    """The factory suite with a p95 latency check (and `extra` measure checks)."""
    body = suite_body(rule=rule)
    body["decision_rule"]["margin"] = 0.5
    body["checks"][0]["slices"] = []
    body["checks"] += copy.deepcopy([LATENCY, *extra])
    return body


def measured_cases(cost_factor: float = 1.0, latency: float = 800.0) -> list[dict[str, Any]]:
    """Twelve accuracy cases with measures, and the suite's other cases."""
    cases = [
        case(
            "accuracy",
            f"e{i:02d}",
            output={"a": i},
            measures={
                "latency_ms": latency + 37.5 * i,
                "cost_usd": round(0.002 * (1 + i / 10) * cost_factor, 9),
                "input_tokens": 1200 + i,
                "output_tokens": 230,
            },
        )
        for i in range(12)
    ]
    cases += [case("no_harm", f"e{i:02d}", output={"v": "ok"}) for i in range(12)]
    cases += [
        case("helpfulness", f"e{i:02d}", r, score=0.9, output={"j": i})
        for i in range(12)
        for r in range(2)
    ]
    return cases


async def issue_with(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    cases: list[dict[str, Any]],
    *,
    ndjson: bool = False,
    **start: Any,
) -> dict[str, Any]:
    """Start, send the cases (JSON or NDJSON), finish: the report."""
    evaluation = await start_evaluation(client, headers, **start)
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}"
    if ndjson:
        body = b"\n".join(orjson.dumps(c) for c in cases)
        sent = await client.post(
            url + "/cases",
            content=body,
            headers={**headers, "content-type": "application/x-ndjson"},
        )
    else:
        sent = await client.post(url + "/cases", json={"cases": cases}, headers=headers)
    assert sent.status_code == 200, sent.text
    done = await client.post(url + "/finish", headers=headers)
    assert done.status_code == 201, done.text
    report: dict[str, Any] = done.json()
    return report


def check_of(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    """A check of a report's body."""
    return next(c for c in report["body"]["checks"] if c["check_id"] == check_id)


@pytest.mark.parametrize("ndjson", [False, True])
async def test_a_p95_latency_check_decides_and_binds_its_measures(
    project: Project, client: httpx.AsyncClient, db: Any, ndjson: bool
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite())
    report = await issue_with(client, headers, measured_cases(), ndjson=ndjson)
    latency = check_of(report, "latency-p95")
    assert latency["status"] == "pass" and latency["measure"]["name"] == "latency_ms"
    assert latency["score"] == 800.0 + 37.5 * 11
    assert latency["cases"] == check_of(report, "accuracy")["cases"]
    async with db() as session:
        rows = (
            await session.execute(
                text(
                    "SELECT example_id, repeat, status, score, output_digest, assurance, "
                    "measures, leaf FROM cases WHERE evaluation_id = :id AND check_id = "
                    "'accuracy' ORDER BY example_id"
                ),
                {"id": report["body"]["evaluation_id"]},
            )
        ).mappings()
        stored = list(rows)
    scorer = check_of(report, "accuracy")["scorer_ref"]["digest"]
    first = stored[0]
    assert first["measures"] == (
        '{"cost_usd":0.002,"input_tokens":1200,"latency_ms":800,"output_tokens":230}'
    )
    # The leaf commits to the measures: without them it would be another leaf.
    record = {**first, "measures": orjson.loads(first["measures"])}
    assert case_leaf(record, scorer) == bytes(first["leaf"])
    assert case_leaf({**record, "measures": None}, scorer) != bytes(first["leaf"])


async def test_cost_within_a_relative_margin_passes_and_beyond_it_fails(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite("non_inferiority", COST))
    baseline = await issue_with(client, headers, measured_cases(), mode="experiment")
    base_id = baseline["body"]["evaluation_id"]
    within = await issue_with(client, headers, measured_cases(1.2), baseline_evaluation_id=base_id)
    cost = check_of(within, "cost")
    assert cost["status"] == "pass", cost["explanation"]
    assert cost["comparison"]["method"] == "paired_bootstrap_log_ratio"
    assert cost["score"] == pytest.approx(-math.log(1.2), abs=1e-9)
    beyond = await issue_with(client, headers, measured_cases(1.45), baseline_evaluation_id=base_id)
    assert check_of(beyond, "cost")["status"] == "fail"
    # The quantile check keeps its threshold under the comparative rule.
    assert check_of(beyond, "latency-p95")["comparison"] is None


async def test_a_missing_measure_leaves_the_report_inconclusive(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite())
    cases = measured_cases()
    del cases[4]["measures"]["latency_ms"]
    report = await issue_with(client, headers, cases)
    assert report["body"]["result"] == "inconclusive"
    assert {"code": "measure_missing", "check_id": "latency-p95", "missing": 1} in report["body"][
        "reasons"
    ]


async def test_bundles_of_measured_reports_verify_and_replay_in_both_verifiers(
    project: Project, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite("non_inferiority", COST))
    baseline = await issue_with(client, headers, measured_cases(), mode="experiment")
    report = await issue_with(
        client,
        headers,
        measured_cases(1.1),
        baseline_evaluation_id=baseline["body"]["evaluation_id"],
    )
    record = await export(client, headers, report["report_id"])
    path = await download(client, headers, record["bundle_id"], tmp_path / "m.jsonl.gz")
    lines = lines_of(path)
    measured = [line for line in lines if line["kind"] == "case" and "measures" in line]
    assert len(measured) == 12
    assert not [line for line in lines if line.get("check_id") == "cost" and "example_id" in line]
    code, outcome = python_verify(path, "--replay")
    assert code == 0, outcome
    assert outcome["replay"].startswith("matched")
    node_code, node_outcome = node_verify(path)
    assert node_code == 0, node_outcome
    # An edited measure, resealed: both verifiers refuse it by the cases tree.
    edited = tmp_path / "edited.jsonl.gz"
    _reseal(path, edited, lambda line: line["measures"].update(latency_ms=1.0))
    code, outcome = python_verify(edited)
    node_code, node_outcome = node_verify(edited)
    assert code == node_code == 1
    assert {f["code"] for f in outcome["failures"]} == {f["code"] for f in node_outcome["failures"]}
    assert "cases_root" in {f["code"] for f in outcome["failures"]}


def _reseal(path: Path, to: Path, change: Any) -> None:
    """The bundle with its first measured case line edited and its trailer recomputed."""
    lines = gzip.decompress(path.read_bytes()).splitlines()
    lines = reseal(edit(lines, lambda v: v["kind"] == "case" and "measures" in v, change))
    to.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines)))


@pytest.mark.parametrize(
    ("measures", "where", "words"),
    [
        ({"latency_ms": -1}, "measures.latency_ms", "finite number >= 0"),
        ({"latency_ms": "fast"}, "measures.latency_ms", "finite number >= 0"),
        ({"latency_ms": True}, "measures.latency_ms", "finite number >= 0"),
        ({f"m{i}": 1 for i in range(17)}, "measures", "at most 16"),
        ({"bad name": 1}, "measures.bad name", "identifier"),
        ([1, 2], "measures", "object"),
    ],
)
@pytest.mark.parametrize("ndjson", [False, True])
async def test_bad_measures_are_refused_naming_case_and_measure_and_nothing_is_stored(
    project: Project,
    client: httpx.AsyncClient,
    db: Any,
    measures: Any,
    where: str,
    words: str,
    ndjson: bool,
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite())
    evaluation = await start_evaluation(client, headers)
    cases = measured_cases()[:5]
    cases[3]["measures"] = measures
    url = f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases"
    if ndjson:
        response = await client.post(
            url,
            content=b"\n".join(orjson.dumps(c) for c in cases),
            headers={**headers, "content-type": "application/x-ndjson"},
        )
    else:
        response = await client.post(url, json={"cases": cases}, headers=headers)
    found = problem(response, 422)
    error = found["errors"][0]
    assert error["loc"][-2:] == (["line 4", where] if ndjson else [3, where]), found
    assert words in error["msg"]
    async with db() as session:
        count = (
            await session.execute(
                text("SELECT count(*) FROM cases WHERE evaluation_id = :id"),
                {"id": evaluation["evaluation_id"]},
            )
        ).scalar_one()
    assert count == 0


async def test_non_finite_measures_are_refused(project: Project, client: httpx.AsyncClient) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite())
    evaluation = await start_evaluation(client, headers)
    line = b'{"check_id":"accuracy","example_id":"e00","repeat":0,"status":"pass",'
    for value in (b"1e400", b"NaN", b"Infinity"):
        response = await client.post(
            f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases",
            content=line + b'"measures":{"latency_ms":' + value + b"}}",
            headers={**headers, "content-type": "application/x-ndjson"},
        )
        assert response.status_code in (400, 422), response.text
    duplicate = line + b'"measures":{"latency_ms":1,"latency_ms":2}}'
    response = await client.post(
        f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases",
        content=duplicate,
        headers={**headers, "content-type": "application/x-ndjson"},
    )
    assert response.status_code in (400, 422) and "duplicate" in response.text.lower()


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        (lambda c: c["measure"].update(of="nothing"), "of", "no check 'nothing'"),
        (lambda c: c["measure"].update(of="latency-p95"), "of", "is a measure check"),
        (lambda c: c.update(scorer={"name": "exact-match", "version": "1"}), None, "neither"),
        (lambda c: c.update(repeats=2), None, "repeats"),
        (
            lambda c: c.update(aggregation={"method": "pass_rate", "threshold": 0.5}),
            None,
            "mean or",
        ),
        (lambda c: c["aggregation"].update(q=1.5), "q", "less than 1"),
        (lambda c: c.update(cluster_tag_prefix="lang:"), "cluster_tag_prefix", "quantile"),
    ],
)
async def test_bad_measure_checks_are_refused_and_no_suite_is_stored(
    project: Project, client: httpx.AsyncClient, change: Any, where: str | None, words: str
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    body = measured_suite()
    change(body["checks"][-1])
    response = await client.put("/api/v1/suites/measured/versions/1", json=body, headers=headers)
    found = problem(response, 422)
    assert words in response.text, found
    if where is not None:
        assert where in str(found["errors"][0]["loc"]), found
    assert (await client.get("/api/v1/suites/measured", headers=headers)).status_code == 404


async def test_quantile_and_margin_relative_belong_to_measure_checks(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    body = suite_body()
    body["checks"][2]["aggregation"] = {"method": "quantile", "q": 0.5, "threshold": 0.5}
    response = await client.put("/api/v1/suites/q/versions/1", json=body, headers=headers)
    assert "quantile applies to measure checks" in problem(response, 422)["detail"] + str(
        response.json()
    )
    body = suite_body()
    body["checks"][2]["aggregation"] = {"method": "mean", "threshold": 0.5, "margin_relative": 1}
    response = await client.put("/api/v1/suites/q/versions/1", json=body, headers=headers)
    assert "margin_relative applies to measure checks" in response.text
    # better: lower on an ordinary mean check is allowed.
    body = suite_body()
    body["checks"][2]["aggregation"] = {"method": "mean", "threshold": 0.5, "better": "lower"}
    response = await client.put("/api/v1/suites/q/versions/1", json=body, headers=headers)
    assert response.status_code == 201, response.text
    assert response.json()["content"]["checks"][2]["aggregation"]["better"] == "lower"


async def test_measure_check_cases_are_refused(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite())
    evaluation = await start_evaluation(client, headers)
    response = await client.post(
        f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases",
        json={"cases": [case("latency-p95", "e00", measures={"latency_ms": 1})]},
        headers=headers,
    )
    assert "unknown check 'latency-p95'" in problem(response, 422)["errors"][0]["msg"]
    assert app is not None


async def latency_moved(
    client: httpx.AsyncClient, headers: dict[str, str], shift: Any, **after_start: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The measured suite's cases, a report of them, and a later one with each accuracy
    example's latency moved by shift(i): (before cases, after cases, before, after)."""
    await define_suite(client, headers, body=measured_suite())
    before_cases = measured_cases()
    after_cases = measured_cases()
    for i, item in enumerate(after_cases[:12]):
        item["measures"]["latency_ms"] += shift(i)
    before = await issue_with(client, headers, before_cases)
    after = await issue_with(client, headers, after_cases, **after_start)
    return before_cases, after_cases, before, after


async def test_the_diff_lists_the_examples_whose_measure_changed_most(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    before_cases, after_cases, before, after = await latency_moved(
        client, headers, lambda i: (i * 7919) % 23 * 10.0 - 100.0, mode="experiment"
    )
    response = await client.get(
        f"/evaluations/api/reports/{after['report_id']}/diff/{before['report_id']}",
        headers=headers,
    )
    assert response.status_code == 200, response.text
    found = response.json()
    assert "latency-p95" not in found["unmatched_checks"]["only_after"]
    (latency,) = found["measures"]
    expected = sorted(
        (
            (
                abs(a["measures"]["latency_ms"] - b["measures"]["latency_ms"]),
                a["example_id"],
                b["measures"]["latency_ms"],
                a["measures"]["latency_ms"],
            )
            for a, b in zip(after_cases[:12], before_cases[:12], strict=True)
        ),
        key=lambda row: (-row[0], row[1]),
    )
    assert [(c["example_id"], c["before"], c["after"]) for c in latency["largest_changes"]] == [
        (e, b, a) for _, e, b, a in expected
    ]


async def test_the_page_and_the_gate_read_a_measure_in_its_units(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite("interval"))
    cases = measured_cases()
    for i, item in enumerate(cases[:12]):
        item["measures"]["latency_ms"] = 1000.0 + 10 * i
    report = await issue_with(client, headers, cases)
    check = check_of(report, "latency-p95")
    expected = measure_sentence(check)
    assert expected is not None and expected.startswith("latency p95 1,110 ms ≤ 2,000 ms")
    assert expected.endswith("(interval 1,090–?)")  # 12 examples: the p95 has no upper end
    assert check["status"] == "inconclusive"
    answer = await sign_in(browser, await project.token("report.read"))
    assert answer.status_code in (302, 303), answer.text
    page = await browser.get(f"/reports/{report['report_id']}")
    assert page.status_code == 200
    assert "lower is better" in page.text
    assert html.escape(expected) in page.text
    assert "too_few_samples_for_quantile" in page.text
    gate = decide(report["body"]["subject"]["digest"], [report], None, None)
    assert expected in summary(gate)


async def test_the_example_page_shows_each_repeat_s_measures(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite())
    report = await issue_with(client, headers, measured_cases())
    answer = await sign_in(browser, await project.token("report.read"))
    assert answer.status_code in (302, 303), answer.text
    page = await browser.get(f"/reports/{report['report_id']}/checks/accuracy/examples/e02")
    assert page.status_code == 200, page.text[:300]
    assert "latency_ms 875 ms" in page.text and "cost_usd 0.0024 USD" in page.text
    assert "input_tokens 1,202 tokens" in page.text
    examples = await browser.get(f"/reports/{report['report_id']}/examples/e02")
    assert examples.status_code == 200
    assert "latency_ms 875 ms" in examples.text


async def test_the_comparison_and_history_pages_read_measures_in_their_units(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    _, _, before, after = await latency_moved(
        client, headers, lambda i: 400.0 if i == 3 else -50.0 if i == 5 else 0.0
    )
    answer = await sign_in(browser, await project.token("report.read"))
    assert answer.status_code in (302, 303), answer.text
    page = await browser.get(f"/reports/{after['report_id']}/compare/{before['report_id']}")
    assert page.status_code == 200, page.text[:300]
    section = page.text[page.text.index('class="compared measures"') :]
    assert 'latency-p95 <span class="method">(latency in ms, lower is better)</span>' in section
    rows = re.findall(r"examples/(e\d\d)\?against=[^>]*>e\d\d</a></td>(.*?)</tr>", section)
    assert [example for example, _ in rows[:2]] == ["e03", "e05"]
    assert "912.5 ms" in rows[0][1] and "1,312 ms" in rows[0][1] and "+400 ms" in rows[0][1]
    assert 'class="tag">worse' in rows[0][1] and "worse" not in rows[1][1]
    assert "−50 ms" in rows[1][1]
    history = await browser.get("/suites/rag/history")
    assert history.status_code == 200, history.text[:300]
    assert "latency-p95 <small>(latency in ms, lower is better)</small>" in history.text
    assert re.search(r'class="tick"[^>]*>[0-9,.]+ ms</text>', history.text)


async def measured_report(
    project: Project, client: httpx.AsyncClient
) -> tuple[dict[str, str], dict[str, Any]]:
    """An admin's headers and a report of the measured suite's cases."""
    headers = await project.admin()
    await define_suite(client, headers, body=measured_suite())
    return headers, await issue_with(client, headers, measured_cases())


async def test_exports_of_a_quantile_with_one_interval_end_validate(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers, report = await measured_report(project, client)
    interval = check_of(report, "latency-p95")["interval"]
    assert interval["lower"] is not None and interval["upper"] is None  # 12 examples
    base = f"/evaluations/api/reports/{report['report_id']}/exports/"
    bom = await client.get(base + "cyclonedx", headers=headers)
    assert bom.status_code == 200, bom.text
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(bom.text) is None
    metrics = [
        m
        for c in orjson.loads(bom.content)["components"]
        for m in c.get("modelCard", {})
        .get("quantitativeAnalysis", {})
        .get("performanceMetrics", [])
        if m["slice"] == "latency-p95"
    ]
    assert metrics and metrics[0]["confidenceInterval"] == {"lowerBound": repr(interval["lower"])}
    card = await client.get(base + "model-index", headers=headers)
    assert card.status_code == 200, card.text


async def test_a_measure_checks_case_proof_is_its_measured_checks_and_raises_no_alarm(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers, report = await measured_report(project, client)
    base = f"/evaluations/api/reports/{report['report_id']}"
    measured = await client.get(base + "/cases/latency-p95/e01/0", headers=headers)
    assert measured.status_code == 200, measured.text
    own = (await client.get(base + "/cases/accuracy/e01/0", headers=headers)).json()
    proof = measured.json()
    assert proof["record"] == own["record"] and "measures" in proof["record"]
    assert proof["root"] == check_of(report, "latency-p95")["cases"]["root"] == own["root"]
    assert proof["audit_path"] == own["audit_path"]
    # Asking never opens an incident: the report stays offered to gates.
    assert (await client.get(base, headers=headers)).json()["envelope"]["integrity"] == "ok"
    missing = await client.get(base + "/cases/latency-p95/e99/0", headers=headers)
    assert missing.status_code == 404
    assert (await client.get(base, headers=headers)).json()["envelope"]["integrity"] == "ok"


async def test_every_link_on_a_measured_reports_pages_resolves(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    _, report = await measured_report(project, client)
    await sign_in(browser, await project.token("report.read", "dataset.read_body"))
    at = f"/reports/{report['report_id']}"
    pages = [
        at,
        at + "/examples/e01",
        at + "/checks/accuracy",
        at + "/checks/accuracy/examples/e01",
    ]
    seen: set[str] = set()
    for path in pages:
        shown = await browser.get(path)
        assert shown.status_code == 200, path
        for href in set(re.findall(r'href="(/[^"#]*)"', shown.text)) - seen:
            seen.add(href)
            if href.startswith(("/static", "/signout")):
                continue
            answer = await browser.get(html.unescape(href))
            assert answer.status_code == 200, (path, href)
    assert any("/checks/accuracy?example=e01" in href for href in seen)
    typed = await browser.get(at + "/checks/latency-p95")
    assert typed.status_code == 404
    assert f"those of &#39;accuracy&#39; ({at}/checks/accuracy)" in typed.text
