"""A board's page in a real headless Chromium against `evalbook serve` (docs/boards.md,
section 4): reached from the suite's history, its sentence about ties, its table and its
rank-interval drawing, no label overlapping another or leaving the drawing; a screenshot as in
tests/web/test_browser.py."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from playwright.async_api import async_playwright, expect

from tests.conftest import cli_admin_token
from tests.web.browser_kit import CHROMIUM_ARGS, chromium, snap
from tests.web.browser_states import _define, cases, issue, subject
from tests.web.test_browser_compare import assert_labels_apart

# Accuracy passes (of 12) of each subject: the best three cannot be told apart from the first.
PASSES = (12, 12, 11, 10, 4, 2, 1, 0)


async def _seed(base: str, token: str) -> tuple[dict[str, object], str]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        await _define(client)
        for passes in PASSES:
            await issue(client, "rag", subject(), cases(passes=passes))
        made = await client.post(
            "/evaluations/api/boards",
            json={"suite": "rag", "version": "1", "check_id": "accuracy"},
        )
        assert made.status_code == 201, made.text
        answer = await client.post(
            "/api/v1/tokens", json={"name": "reader", "permissions": ["report.read"]}
        )
        assert answer.status_code == 201, answer.text
        return made.json(), answer.json()["token"]


async def test_a_board_page_shows_ranks_and_ties(
    served: tuple[str, str], database_url: str, tmp_path: Path
) -> None:
    base, _ = served
    admin = cli_admin_token(database_url, f"review/board-{uuid.uuid4().hex[:6]}")
    board, token = await _seed(base, admin)
    body = board["body"]
    assert isinstance(body, dict)
    tied = len(body["top_group"])
    assert 1 < tied < len(PASSES), body["top_group"]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        await page.goto(f"{base}/signin?next=/suites/rag/history")
        await page.get_by_label("API token").fill(token)
        await page.get_by_label("API token").press("Enter")
        await expect(page).to_have_url(f"{base}/suites/rag/history")
        boards = page.locator("table.list", has_text="Boards of rag")
        await boards.locator(f'a[href="/boards/{board["board_id"]}"]').click()
        await expect(page).to_have_url(f"{base}/boards/{board['board_id']}")
        await expect(page.get_by_role("status")).to_have_text(
            f"{tied} of the {len(PASSES)} subjects are tied at the top: none of them is "
            "significantly worse than the first (Holm, family-wise alpha 0.05)."
        )
        rows = page.locator("table.list tbody tr")
        await expect(rows).to_have_count(len(PASSES))
        await expect(page.locator("svg.ranks g.rank-row")).to_have_count(len(PASSES))
        await expect(page.locator("svg.ranks g.top-group")).to_have_count(tied)
        first = body["subjects"][0]
        lo, hi = first["rank_interval"]
        await expect(rows.first).to_contain_text(f"{lo}–{hi}")
        await expect(rows.first.locator(f'a[href="/reports/{first["report_id"]}"]')).to_have_count(
            1
        )
        assert await assert_labels_apart(page) >= len(PASSES) + 4
        await snap(page, "board", tmp_path)
        await browser.close()
