"""The drill-down pages rendered over ASGI: the comparison, a check's cases, an example, a
suite's history and the comparative report's fixes; bad input and permissions. (Chromium
drives them in tests/web/test_browser_compare.py.)"""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest

from tests.bundle_helpers import comparative_suite, issue
from tests.conftest import Project, auth
from tests.factories import define_suite, suite_body
from tests.pages_helpers import sign_in
from tests.services.test_diffs import _after, _before


@pytest.fixture
async def pair(project: Project, client: httpx.AsyncClient) -> dict[str, Any]:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    before = await issue(client, headers, _before())
    after = await issue(client, headers, _after())
    return {"project": project, "headers": headers, "before": before, "after": after}


async def _signed(browser: httpx.AsyncClient, project: Project, *permissions: str) -> None:
    answer = await sign_in(browser, await project.token(*permissions))
    assert answer.status_code == 303, answer.text


async def test_comparison_page(pair: dict[str, Any], browser: httpx.AsyncClient) -> None:
    await _signed(browser, pair["project"], "report.read")
    after, before = pair["after"]["report_id"], pair["before"]["report_id"]
    page = await browser.get(f"/reports/{after}/compare/{before}")
    assert page.status_code == 200, page.text
    html = page.text
    assert f'href="/reports/{before}"' in html and f'href="/reports/{after}"' in html
    assert "p = 0<" not in html and "p = 0 " not in html
    assert re.search(r"McNemar \(exact\): b = \d+ pass → fail", html)
    # A regression linked to its example side by side with the report before.
    assert f'href="/reports/{after}/examples/e03?against={before}"' in html
    assert 'role="img"' in html and "<desc" in html  # the change drawn, with a text
    assert "<script" not in html
    chosen = await browser.get(
        f"/reports/{after}/compare/{before}", params={"transition": "pass-fail"}
    )
    assert chosen.status_code == 200 and "pass → fail" in chosen.text
    sliced = await browser.get(f"/reports/{after}/compare/{before}", params={"slice": "german"})
    assert sliced.status_code == 200 and "accuracy / german" in sliced.text
    for params, status in (
        ({"transition": "up-down"}, 400),
        ({"slice": "<b>"}, 400),
        ({"transition": "pass-fail", "cursor": "!!"}, 400),
        ({"slice": "nope"}, 400),
        ({"transition": "pass-fail", "cursor": "6565"}, 400),  # a position without its check
    ):
        answer = await browser.get(f"/reports/{after}/compare/{before}", params=params)
        assert answer.status_code == status, (params, answer.status_code)
        assert "<b>" not in answer.text
    assert (await browser.get(f"/reports/{after}/compare/{after}")).status_code == 422
    assert (await browser.get(f"/reports/{after}/compare/{uuid.uuid4()}")).status_code == 404
    form = await browser.get("/compare", params={"after": after, "before": before})
    assert form.status_code == 303
    assert form.headers["location"] == f"/reports/{after}/compare/{before}"
    assert (await browser.get("/compare", params={"after": "x"})).status_code == 400


async def test_check_cases_page(pair: dict[str, Any], browser: httpx.AsyncClient) -> None:
    await _signed(browser, pair["project"], "report.read")
    after = pair["after"]["report_id"]
    page = await browser.get(f"/reports/{after}/checks/helpfulness")
    assert page.status_code == 200, page.text
    assert page.text.count('class="proof-link"') == 24
    assert "Outputs are shown to tokens with dataset.read_body" in page.text
    failed = await browser.get(f"/reports/{after}/checks/accuracy", params={"status": "fail"})
    assert failed.status_code == 200
    rows = re.findall(r"/examples/(e\d\d)\"", failed.text)
    assert rows == ["e01", "e02", "e05", "e09"]
    german = await browser.get(f"/reports/{after}/checks/accuracy", params={"tag": "lang:de"})
    assert re.findall(r"/examples/(e\d\d)\"", german.text) == ["e00", "e04", "e08"]
    one = await browser.get(f"/reports/{after}/checks/accuracy", params={"example": "e04"})
    assert re.findall(r"/examples/(e\d\d)\"", one.text) == ["e04"]
    for params, status in (
        ({"status": "maybe"}, 400),
        ({"flaky": "sometimes"}, 400),
        ({"example": "<x>"}, 400),
        ({"cursor": "not a cursor"}, 400),
        ({"cursor": "6530352e30.0"}, 400),  # a position of the old form, without its check
    ):
        answer = await browser.get(f"/reports/{after}/checks/accuracy", params=params)
        assert answer.status_code == status, (params, answer.text[:300])
    assert (await browser.get(f"/reports/{after}/checks/nope")).status_code == 404


async def test_check_cases_pages_and_outputs(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    cases = [{**c, "output": {"answer": f"out-{c['example_id']}-{c['repeat']}"}} for c in _before()]
    report = await issue(client, headers, cases)
    await _signed(browser, project, "report.read", "dataset.read_body")
    seen: list[str] = []
    url: str | None = f"/reports/{report['report_id']}/checks/helpfulness"
    while url:
        page = await browser.get(url)
        assert page.status_code == 200, page.text
        seen += re.findall(r"out-(e\d\d-\d)", page.text)
        following = re.search(r'href="(\?[^"]*cursor=[^"]+)">Next cases', page.text)
        url = None
        if following:
            url = f"/reports/{report['report_id']}/checks/helpfulness" + following.group(1).replace(
                "&amp;", "&"
            )
    assert seen == [f"e{i:02d}-{r}" for i in range(12) for r in range(2)]


async def test_example_page(pair: dict[str, Any], browser: httpx.AsyncClient) -> None:
    project = pair["project"]
    after, before = pair["after"]["report_id"], pair["before"]["report_id"]
    await _signed(browser, project, "report.read")
    page = await browser.get(f"/reports/{after}/examples/e03")
    assert page.status_code == 200, page.text
    assert "The input is shown to tokens with dataset.read_body" in page.text
    assert "question 3" not in page.text
    assert f'href="/reports/{before}/examples/e03"' in page.text  # it superseded `before`
    assert (await browser.get(f"/reports/{after}/examples/nope")).status_code == 404
    other = httpx.AsyncClient(transport=browser._transport, base_url="https://testserver")
    async with other:
        await _signed(other, project, "report.read", "dataset.read_body")
        full = await other.get(f"/reports/{after}/examples/e03")
        assert "question 3" in full.text
        assert full.text.count('class="proof-link"') == 1 + 1 + 2  # each check's repeats


async def test_history_page_and_api(
    pair: dict[str, Any], client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    headers = pair["headers"]
    answer = await client.get("/evaluations/api/suites/rag/history", headers=headers)
    assert answer.status_code == 200, answer.text
    history = answer.json()
    ids = [r["report_id"] for r in history["reports"]]
    assert ids == [pair["before"]["report_id"], pair["after"]["report_id"]]
    assert history["reports"][0]["status"] == "superseded"
    assert set(history["reports"][1]["checks"]) == {"accuracy", "no_harm", "helpfulness"}
    one = await client.get(
        "/evaluations/api/suites/rag/history", params={"check": "accuracy"}, headers=headers
    )
    assert set(one.json()["reports"][0]["checks"]) == {"accuracy"}
    for params, status in (({"limit": "0"}, 422), ({"limit": "1001"}, 422), ({"check": "<"}, 422)):
        bad = await client.get(
            "/evaluations/api/suites/rag/history", params=params, headers=headers
        )
        assert bad.status_code == status
    missing = await client.get("/evaluations/api/suites/nope/history", headers=headers)
    assert missing.status_code == 404
    writer = auth(await pair["project"].token("evaluation.write"))
    denied = await client.get("/evaluations/api/suites/rag/history", headers=writer)
    assert denied.status_code == 403
    await _signed(browser, pair["project"], "report.read")
    page = await browser.get("/suites/rag/history")
    assert page.status_code == 200, page.text
    assert page.text.count('class="chart trend"') == 3
    assert "superseded" in page.text
    assert f'href="/reports/{ids[1]}/compare/{ids[0]}"' in page.text


async def test_comparative_report_page_names_its_baseline(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=comparative_suite())
    baseline = await issue(client, headers, _before(), mode="experiment")
    report = await issue(
        client, headers, _after(), baseline_evaluation_id=baseline["body"]["evaluation_id"]
    )
    await _signed(browser, project, "report.read")
    page = await browser.get(f"/reports/{report['report_id']}")
    assert page.status_code == 200, page.text
    html = page.text
    assert f'id="baseline-link">{baseline["report_id"]}' in html
    assert f'href="/reports/{report["report_id"]}/compare/{baseline["report_id"]}"' in html
    assert "candidate <strong>" in html
    assert not re.search(r"p = 0(<|\s|$)", html)


async def test_subject_page_compares_earlier_reports(
    pair: dict[str, Any], browser: httpx.AsyncClient
) -> None:
    await _signed(browser, pair["project"], "report.read")
    subject = pair["after"]["body"]["subject"]["digest"]
    page = await browser.get(f"/subjects/{subject}")
    assert page.status_code == 200, page.text
    after, before = pair["after"]["report_id"], pair["before"]["report_id"]
    assert f'href="/reports/{after}/compare/{before}">against the current report' in page.text
