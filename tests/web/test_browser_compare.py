"""The drill-down pages in a real headless Chromium against `evalbook serve`: a reviewer goes
from a failed report to what changed, to a regression's example, to a check's cases and a
case's proof, and through a suite's history; no text label of any chart overlaps another or
leaves its drawing (the browser's own text boxes, measured). Screenshots as in
tests/web/test_browser.py."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import rfc8785
from playwright.async_api import Page, async_playwright, expect

from app.digest import merkle
from tests.conftest import cli_admin_token
from tests.web.browser_kit import CHROMIUM_ARGS, chromium, snap
from tests.web.browser_states import _define, cases, comparative_pair, issue, subject

MEASURE_LABELS = """
() => [...document.querySelectorAll('svg')].map(svg => {
  const box = svg.getBoundingClientRect();
  const rect = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return {
    name: (svg.querySelector('title') || {}).textContent || svg.getAttribute('class'),
    box: [box.left, box.top, box.right, box.bottom],
    texts: [...svg.querySelectorAll(':scope > text, :scope > g > text')].map(t => (
      {text: t.textContent, box: rect(t)})),
    lines: [...svg.querySelectorAll(':scope > line, :scope > g > line')].map(l => (
      {line: l.getAttribute('class'), box: rect(l)})),
  };
})
"""


def _crosses(line: list[float], text: list[float]) -> bool:
    """A vertical or horizontal line's box (zero wide or zero high) passes through a text box
    (half a pixel of anti-aliasing allowed)."""
    left, top, right, bottom = line
    if right - left <= 1:  # vertical
        return (
            text[0] + 0.5 < left < text[2] - 0.5 and top < text[3] - 0.5 and text[1] + 0.5 < bottom
        )
    if bottom - top <= 1:  # horizontal
        return (
            text[1] + 0.5 < top < text[3] - 0.5 and left < text[2] - 0.5 and text[0] + 0.5 < right
        )
    return False


def _overlap(a: list[float], b: list[float]) -> bool:
    # Touching edges are no overlap; half a pixel of anti-aliasing is allowed.
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


async def assert_labels_apart(page: Page) -> int:
    """Every chart's text labels: none overlaps another, none reaches outside its drawing."""
    charts: list[dict[str, Any]] = await page.evaluate(MEASURE_LABELS)
    measured = 0
    for chart in charts:
        texts = chart["texts"]
        for i, first in enumerate(texts):
            box = chart["box"]
            inside = (
                first["box"][0] >= box[0] - 0.5
                and first["box"][2] <= box[2] + 0.5
                and first["box"][1] >= box[1] - 0.5
                and first["box"][3] <= box[3] + 0.5
            )
            assert inside, (chart["name"], first, box)
            for line in chart["lines"]:
                assert not _crosses(line["box"], first["box"]), (chart["name"], line, first)
            for second in texts[i + 1 :]:
                assert not _overlap(first["box"], second["box"]), (chart["name"], first, second)
            measured += 1
    return measured


async def _seed(base: str, token: str) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        await _define(client)
        first = subject()
        ids: dict[str, str] = {}
        ids["before"] = (await issue(client, "rag", first, cases(passes=12)))["report_id"]
        ids["after"] = (await issue(client, "rag", first, cases(passes=5)))["report_id"]
        await issue(client, "rag", subject(), cases(passes=10))
        ids["baseline"], ids["comparative"] = await comparative_pair(client)
        answer = await client.post(
            "/api/v1/tokens",
            json={"name": "reviewer", "permissions": ["report.read", "dataset.read_body"]},
        )
        assert answer.status_code == 201, answer.text
        ids["token"] = answer.json()["token"]
        return ids


async def test_a_reviewer_finds_what_changed(
    served: tuple[str, str], database_url: str, tmp_path: Path
) -> None:
    base, _ = served
    # A project of its own: the reports list of tests/web/test_browser.py counts demo/demo's.
    admin = cli_admin_token(database_url, f"review/changes-{uuid.uuid4().hex[:6]}")
    ids = await _seed(base, admin)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        context = await browser.new_context(
            accept_downloads=True, viewport={"width": 1280, "height": 900}
        )
        page = await context.new_page()
        await page.goto(f"{base}/signin?next=/reports/{ids['after']}")
        await page.get_by_label("API token").fill(ids["token"])
        await page.get_by_label("API token").press("Enter")
        await expect(page).to_have_url(f"{base}/reports/{ids['after']}")
        measured = await assert_labels_apart(page)

        # From the failed report to what changed since the report it superseded.
        await page.get_by_role("link", name="what changed").first.click()
        await expect(page).to_have_url(f"{base}/reports/{ids['after']}/compare/{ids['before']}")
        await expect(page.get_by_role("heading", level=1)).to_have_text("What changed")
        await expect(page.locator("text=p = 0.0156").first).to_be_visible()
        measured += await assert_labels_apart(page)
        await snap(page, "compare", tmp_path)
        regressions = page.locator("table.regressions").first
        await expect(regressions.locator("tbody tr")).to_have_count(7)
        # The outputs before and after, side by side on the regression's row.
        row = regressions.locator("tbody tr", has_text="e05")
        await expect(row.locator("td.outputs").nth(0)).to_contain_text("6 apples")
        await expect(row.locator("td.outputs").nth(1)).to_contain_text("I cannot tell")
        await snap(page, "compare-outputs", tmp_path)
        await regressions.get_by_role("link", name="e05").click()
        await expect(page).to_have_url(
            f"{base}/reports/{ids['after']}/examples/e05?against={ids['before']}"
        )
        await expect(page.locator("pre.subject").first).to_contain_text("question 5")
        # The example's own outcome, apart from its check's result, on both sides.
        accuracy = page.locator(".example-check", has_text="accuracy").first
        await expect(accuracy.locator(".example-outcome")).to_contain_text("Fail")
        await expect(accuracy.locator(".example-outcome-before")).to_contain_text("Pass")
        await expect(accuracy.locator(".check-result")).to_contain_text("score")
        side = accuracy.locator("table.side-by-side tbody tr").first
        await expect(side).to_contain_text("6 apples")
        await expect(side).to_contain_text("I cannot tell")
        await snap(page, "example", tmp_path)
        await page.get_by_role("link", name="the report this one superseded").click()
        await expect(page).to_have_url(f"{base}/reports/{ids['before']}/examples/e05")

        # A check's cases, filtered, and one case's proof downloaded and checked.
        await page.goto(f"{base}/reports/{ids['after']}/checks/accuracy")
        await page.get_by_label("Status").select_option("fail")
        await page.get_by_role("button", name="Filter").click()
        await expect(page.locator("table.cases tbody tr")).to_have_count(7)
        await snap(page, "check-cases", tmp_path)
        async with page.expect_download() as waiting:
            await page.locator("a.proof-link").first.click()
        saved = tmp_path / "proof.json"
        await (await waiting.value).save_as(str(saved))
        proof = json.loads(saved.read_text())
        record = rfc8785.dumps(proof["record"])
        assert merkle.verify_inclusion(
            merkle.leaf_hash(record),
            proof["leaf_index"],
            proof["tree_size"],
            [merkle.from_hex_digest(d) for d in proof["audit_path"]],
            merkle.from_hex_digest(proof["root"]),
        )

        # The suite's history: trends drawn on the server, any two compared.
        await page.goto(f"{base}/reports/{ids['after']}")
        await page.get_by_role("link", name="every gate report of rag").click()
        await expect(page).to_have_url(f"{base}/suites/rag/history")
        await expect(page.locator("svg.trend")).to_have_count(3)
        measured += await assert_labels_apart(page)
        await snap(page, "history", tmp_path)
        await page.get_by_role("button", name="Compare").click()
        await expect(page.get_by_role("heading", level=1)).to_have_text("What changed")

        # The comparative report names its baseline and shows the candidate's own score.
        await page.goto(f"{base}/reports/{ids['comparative']}")
        await expect(page.locator("#baseline-link")).to_have_text(ids["baseline"])
        await expect(page.locator(".own").first).to_contain_text("candidate")
        measured += await assert_labels_apart(page)
        await snap(page, "report-comparative", tmp_path)
        await browser.close()
    assert measured > 20
