"""The diff of two reports (docs/compare.md): transitions against a plain loop over the cases,
McNemar's exact test against statsmodels, the paired difference against the engine's seeded
bootstrap, every changed case proven in both reports, pages and bad input."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from statsmodels.stats.contingency_tables import mcnemar

from app.aggregation.stats import bootstrap
from app.digest import merkle
from app.services import diffs as diffs_service
from tests.bundle_helpers import issue
from tests.conftest import Project, auth, new_project
from tests.factories import case, define_suite, problem, suite_body

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server

IDS = [f"e{i:02d}" for i in range(12)]


def _before() -> list[dict[str, Any]]:
    cases = [case("accuracy", e, status="pass" if i % 3 else "fail") for i, e in enumerate(IDS)]
    cases += [case("no_harm", e) for e in IDS[:11]]
    cases += [
        case("helpfulness", e, r, score=0.5 + i / 40 + r / 100)
        for i, e in enumerate(IDS)
        for r in range(2)
    ]
    return cases


def _after() -> list[dict[str, Any]]:
    statuses = {0: "pass", 1: "fail", 2: "fail", 3: "pass", 4: "error", 5: "fail", 6: "pass"}
    cases = [
        case("accuracy", e, status=statuses.get(i, "pass" if i % 3 else "fail"))
        for i, e in enumerate(IDS)
        if i != 10
    ]
    cases += [case("no_harm", e, status="fail" if i == 2 else "pass") for i, e in enumerate(IDS)]
    cases += [
        case("helpfulness", e, r, score=0.5 + i / 40 + r / 100 + (0.2 if i % 2 else -0.1))
        for i, e in enumerate(IDS)
        for r in range(2)
    ]
    return cases


def _outcomes(cases: list[dict[str, Any]], check: str, repeats: int) -> dict[str, str]:
    """Each example's outcome, by a plain loop over the cases."""
    found: dict[str, str] = {}
    for example in IDS:
        mine = [c for c in cases if c["check_id"] == check and c["example_id"] == example]
        if not mine:
            found[example] = "missing"
        elif len(mine) < repeats or any(c["status"] not in ("pass", "fail") for c in mine):
            found[example] = "error"
        elif all(c["status"] == "pass" for c in mine):
            found[example] = "pass"
        else:
            found[example] = "fail"
    return found


def _values(cases: list[dict[str, Any]], check: str) -> dict[str, float]:
    scores: dict[str, list[float]] = {}
    for c in cases:
        if c["check_id"] == check:
            scores.setdefault(c["example_id"], []).append(c["score"])
    return {e: sum(v) / len(v) for e, v in scores.items()}


@pytest.fixture
async def two(project: Project, client: httpx.AsyncClient) -> dict[str, Any]:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    before = await issue(client, headers, _before())
    after = await issue(client, headers, _after())
    return {"headers": headers, "before": before, "after": after, "project": project}


def _url(after: dict[str, Any], before: dict[str, Any], tail: str = "") -> str:
    return f"/evaluations/api/reports/{after['report_id']}/diff/{before['report_id']}{tail}"


async def test_transitions_mcnemar_and_difference_match_oracles(
    two: dict[str, Any], client: httpx.AsyncClient
) -> None:
    answer = await client.get(_url(two["after"], two["before"]), headers=two["headers"])
    assert answer.status_code == 200, answer.text
    diff = answer.json()
    assert diff["after"]["report_id"] == two["after"]["report_id"]
    assert diff["unmatched_checks"] == {"only_after": [], "only_before": []}
    checks = {c["check_id"]: c for c in diff["checks"]}
    for check_id, repeats in (("accuracy", 1), ("no_harm", 1), ("helpfulness", 2)):
        found = checks[check_id]
        before = _outcomes(_before(), check_id, repeats)
        after = _outcomes(_after(), check_id, repeats)
        expected: dict[str, int] = {}
        for example in IDS:
            key = f"{before[example]}-{after[example]}"
            expected[key] = expected.get(key, 0) + 1
        assert {k: v for k, v in found["transitions"].items() if v} == expected
        pairs = [(before[e], after[e]) for e in IDS]
        table = [
            [pairs.count(("pass", "pass")), pairs.count(("pass", "fail"))],
            [pairs.count(("fail", "pass")), pairs.count(("fail", "fail"))],
        ]
        oracle = mcnemar(table, exact=True).pvalue
        assert found["mcnemar"]["p_value"] == pytest.approx(oracle, rel=1e-12)
        assert (found["mcnemar"]["b"], found["mcnemar"]["c"]) == (table[0][1], table[1][0])
        # Every changed pair's examples listed, in byte order.
        for page in found["changes"]:
            b, a = page["transition"].split("-")
            assert page["example_ids"] == [e for e in IDS if (before[e], after[e]) == (b, a)]
        assert found["cases_proven_against"]["after"]["root"].startswith("sha256:")
    # The paired difference: the engine's seeded bootstrap over differences from a plain loop.
    helpful = checks["helpfulness"]
    b_values, a_values = _values(_before(), "helpfulness"), _values(_after(), "helpfulness")
    differences = np.array([a_values[e] - b_values[e] for e in IDS])
    name = f"{two['after']['report_id']}/{two['before']['report_id']}/helpfulness"
    seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:6], "big")
    oracle_interval = bootstrap(differences, 0.05, seed)
    interval = helpful["difference"]["interval"]
    assert interval["seed"] == seed
    assert interval["lower"] == pytest.approx(oracle_interval.lower, abs=1e-11)
    assert interval["upper"] == pytest.approx(oracle_interval.upper, abs=1e-11)
    assert helpful["difference"]["estimate"] == pytest.approx(differences.mean(), abs=1e-11)
    assert helpful["difference"]["method"] == "paired_bootstrap"
    drops = [d["example_id"] for d in helpful["top_drops"]]
    assert drops == [e for i, e in enumerate(IDS) if i % 2 == 0]
    assert len(helpful["top_gains"]) == 6
    # Pass/fail: the paired difference in pass rate over the examples executed in both.
    accuracy = checks["accuracy"]
    before = _outcomes(_before(), "accuracy", 1)
    after = _outcomes(_after(), "accuracy", 1)
    both = [e for e in IDS if before[e] in ("pass", "fail") and after[e] in ("pass", "fail")]
    rate = np.mean([(after[e] == "pass") - (before[e] == "pass") for e in both])
    assert accuracy["difference"]["pairs"] == len(both)
    assert accuracy["difference"]["estimate"] == pytest.approx(rate, abs=1e-12)
    # The slice (lang:de: e00, e04, e08) is diffed over its examples alone.
    german = accuracy["slices"][0]
    assert german["name"] == "german"
    assert sum(german["transitions"].values()) == 3


async def test_every_listed_case_is_proven_in_both_reports(
    two: dict[str, Any], client: httpx.AsyncClient
) -> None:
    headers = two["headers"]
    diff = (await client.get(_url(two["after"], two["before"]), headers=headers)).json()
    roots = {c["check_id"]: c["cases_proven_against"] for c in diff["checks"]}
    answer = await client.get(_url(two["after"], two["before"], ".ndjson"), headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    lines = [orjson.loads(line) for line in answer.content.splitlines()]
    assert lines, "the two reports differ"
    keyed = {(c["check_id"], c["example_id"], c["repeat"]): c for c in _after()}
    before_keyed = {(c["check_id"], c["example_id"], c["repeat"]): c for c in _before()}
    changed = {
        k
        for k in keyed.keys() | before_keyed.keys()
        if (keyed.get(k) or {}).get("status") != (before_keyed.get(k) or {}).get("status")
        or (keyed.get(k) or {}).get("score") != (before_keyed.get(k) or {}).get("score")
    }
    assert {(x["check_id"], x["example_id"], x["repeat"]) for x in lines} == changed
    for line in lines:
        for side, report in (("after", two["after"]), ("before", two["before"])):
            record = line[side]
            if record is None:
                continue
            url = (
                f"/evaluations/api/reports/{report['report_id']}/cases/"
                f"{line['check_id']}/{line['example_id']}/{line['repeat']}"
            )
            proof = (await client.get(url, headers=headers)).json()
            assert proof["record"]["status"] == record["status"]
            assert proof["record"]["score"] == record["score"]
            tree = roots[line["check_id"]][side]
            assert proof["root"] == tree["root"]
            assert merkle.verify_inclusion(
                merkle.leaf_hash(orjson.dumps(proof["record"], option=orjson.OPT_SORT_KEYS)),
                proof["leaf_index"],
                tree["count"],
                [merkle.from_hex_digest(d) for d in proof["audit_path"]],
                merkle.from_hex_digest(tree["root"]),
            )


async def test_transition_pages_and_cursor(two: dict[str, Any], client: httpx.AsyncClient) -> None:
    headers = two["headers"]
    url = _url(two["after"], two["before"])
    seen: list[str] = []
    cursor = None
    while True:
        params = {"check": "helpfulness", "transition": "pass-pass", "limit": "2"}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get(url, params=params, headers=headers)).json()
        seen += page["example_ids"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(seen) and len(seen) == page["count"]
    for params, status in (
        ({"check": "helpfulness"}, 422),
        ({"transition": "pass-fail"}, 422),
        ({"check": "helpfulness", "transition": "up-down"}, 422),
        ({"check": "nope", "transition": "pass-fail"}, 404),
        ({"check": "helpfulness", "transition": "pass-fail", "cursor": "!!"}, 400),
        ({"check": "helpfulness", "transition": "pass-fail", "cursor": "abc"}, 400),
        ({"check": "helpfulness", "transition": "pass-fail", "cursor": "6530"}, 400),
        ({"check": "helpfulness", "transition": "pass-fail", "limit": "0"}, 422),
        ({"check": "helpfulness", "transition": "pass-fail", "limit": "x"}, 422),
    ):
        problem(await client.get(url, params=params, headers=headers), status)


async def test_bad_diffs(two: dict[str, Any], client: httpx.AsyncClient, db: Any) -> None:
    headers = two["headers"]
    after, before = two["after"], two["before"]
    same = f"/evaluations/api/reports/{after['report_id']}/diff/{after['report_id']}"
    assert "itself" in problem(await client.get(same, headers=headers), 422)["detail"]
    unknown = f"/evaluations/api/reports/{after['report_id']}/diff/{uuid.uuid4()}"
    problem(await client.get(unknown, headers=headers), 404)
    problem(await client.get(unknown + ".ndjson", headers=headers), 404)
    problem(
        await client.get(f"/evaluations/api/reports/x/diff/{uuid.uuid4()}", headers=headers), 404
    )
    problem(await client.get(_url(after, before)), 401)
    other = await new_project(db, client)
    foreign = await other.admin()
    problem(await client.get(_url(after, before), headers=foreign), 404)
    writer = auth(await two["project"].token("evaluation.write"))
    problem(await client.get(_url(after, before), headers=writer), 403)


async def test_reports_of_different_suites_match_checks_by_id(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    before = await issue(client, headers, _before())
    other = suite_body()
    other["checks"] = [other["checks"][0], {**other["checks"][1], "check_id": "no_harm_v2"}]
    await define_suite(client, headers, suite="rag2", body=other)
    renamed = [
        {**c, "check_id": "no_harm_v2"} if c["check_id"] == "no_harm" else c
        for c in _after()
        if c["check_id"] != "helpfulness"
    ]
    after = await issue(client, headers, renamed, suite="rag2")
    diff = (await client.get(_url(after, before), headers=headers)).json()
    assert [c["check_id"] for c in diff["checks"]] == ["accuracy"]
    assert diff["unmatched_checks"] == {
        "only_after": ["no_harm_v2"],
        "only_before": ["no_harm", "helpfulness"],
    }


async def test_reports_over_different_dataset_versions_match_examples_by_id(
    project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    before = await issue(client, headers, [case("accuracy", e) for e in IDS])
    examples = [{"id": f"e{i:02d}", "body": {"q": i}, "tags": ["lang:de"]} for i in range(1, 13)]
    answer = await client.put(
        "/api/v1/datasets/qa/versions/2", json={"examples": examples}, headers=headers
    )
    assert answer.status_code == 201, answer.text
    later = suite_body()
    later["checks"] = [{**later["checks"][0], "dataset": {"name": "qa", "version": "2"}}]
    answer = await client.put("/api/v1/suites/rag/versions/2", json=later, headers=headers)
    assert answer.status_code == 201, answer.text
    answer = await client.post("/api/v1/suites/rag/versions/2/activate", headers=headers)
    assert answer.status_code == 200, answer.text
    after_cases = [
        case("accuracy", f"e{i:02d}", status="fail" if i == 5 else "pass") for i in range(1, 13)
    ]
    after = await issue(client, headers, after_cases)
    diff = (await client.get(_url(after, before), headers=headers)).json()
    (accuracy,) = diff["checks"]
    assert {k: v for k, v in accuracy["transitions"].items() if v} == {
        "pass-pass": 10,
        "pass-fail": 1,
        "pass-missing": 1,
        "missing-pass": 1,
    }
    pages = {p["transition"]: p["example_ids"] for p in accuracy["changes"]}
    assert pages == {"pass-fail": ["e05"], "pass-missing": ["e00"], "missing-pass": ["e12"]}
    # An example is in the slice when either side's dataset tags it: e00 (German in v1) and
    # every example of v2.
    german = accuracy["slices"][0]
    assert sum(german["transitions"].values()) == 13
    assert accuracy["difference"]["pairs"] == 11


async def test_concurrent_requests_for_one_diff_agree(
    two: dict[str, Any], client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests racing for a diff not yet kept: one computes it, the rest wait and read it."""
    computed: list[str] = []
    real = diffs_service.diff_check

    def counted(*args: Any) -> Any:
        computed.append(args[2])
        return real(*args)

    monkeypatch.setattr(diffs_service, "diff_check", counted)
    url = _url(two["after"], two["before"])
    answers = await asyncio.gather(*(client.get(url, headers=two["headers"]) for _ in range(6)))
    assert {a.status_code for a in answers} == {200}
    assert len({a.content for a in answers}) == 1
    assert sorted(computed) == ["accuracy", "helpfulness", "no_harm"]  # each check once
