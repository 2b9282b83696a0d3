"""End to end in a real headless Chromium (Debian's package) driven by Playwright, against
`evalbook serve` in its own process: sign in, open reports in every state, verify, export
and download a bundle, follow supersession links. Screenshots of each state are kept in
EVALBOOK_SCREENSHOT_DIR (`make screenshots` points it at docs/screenshots/)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from playwright.async_api import async_playwright, expect

from tests.bundle_helpers import node_verify, python_verify
from tests.web.browser_kit import CHROMIUM_ARGS, chromium, snap
from tests.web.browser_states import seed


async def test_a_reviewer_reads_verifies_exports_and_follows_supersession(
    served: tuple[str, str], tmp_path: Path
) -> None:
    base, admin = served
    states = await seed(base, admin)
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{base}/api/v1/tokens",
            json={
                "name": "reviewer",
                "permissions": ["report.read", "report.export", "dataset.read_body"],
            },
            headers={"Authorization": f"Bearer {admin}"},
        )
    assert answer.status_code == 201, answer.text
    token = answer.json()["token"]
    await asyncio.sleep(1.2)  # the brief suite's report expires

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        context = await browser.new_context(
            accept_downloads=True, viewport={"width": 1280, "height": 900}
        )
        page = await context.new_page()

        await page.goto(f"{base}/reports/{states['pass']}")
        await expect(page).to_have_url(f"{base}/signin?next=%2Freports%2F{states['pass']}")
        await snap(page, "signin", tmp_path)
        # By keyboard: the token field has the focus; Enter submits.
        await page.keyboard.type(token)
        await page.keyboard.press("Enter")
        await expect(page).to_have_url(f"{base}/reports/{states['pass']}")
        await expect(page.get_by_role("heading", level=1)).to_contain_text("Pass")

        for state, report_id in states.items():
            await page.goto(f"{base}/reports/{report_id}")
            await expect(page.get_by_role("heading", level=1)).to_be_visible()
            await snap(page, f"report-{state}", tmp_path)
        await expect(page.locator("svg.chart title").first).to_contain_text("paired difference")

        await page.goto(f"{base}/reports/{states['inconclusive']}")
        await expect(page.locator(".reasons")).to_contain_text("incomplete")
        await page.goto(f"{base}/reports/{states['expired']}")
        await expect(page.get_by_role("status").first).to_contain_text("expired")

        await page.goto(f"{base}/reports/{states['pass']}")
        await page.get_by_role("button", name="Verify the digest").click()
        await expect(page.locator("#verify-result")).to_contain_text("Verified")
        await page.get_by_role("button", name="Export a bundle").click()
        await expect(page.locator("#export-result")).to_contain_text("Bundle ready")
        await snap(page, "report-verified-and-exported", tmp_path)
        async with page.expect_download() as waiting:
            await page.locator("#export-result a").click()
        download = await waiting.value
        saved = tmp_path / "downloaded.jsonl.gz"
        await download.save_as(str(saved))
        assert python_verify(saved)[0] == 0
        assert node_verify(saved)[0] == 0

        await page.goto(f"{base}/reports/{states['superseded']}")
        await expect(page.get_by_role("status").first).to_contain_text("superseded")
        await page.get_by_role("link", name="the report that superseded it").click()
        await expect(page).to_have_url(f"{base}/reports/{states['pass']}")
        await page.get_by_role("link", name=states["superseded"]).click()
        await expect(page).to_have_url(f"{base}/reports/{states['superseded']}")

        await page.goto(f"{base}/reports")
        # The list fits a 1,280-pixel window: no horizontal scrolling.
        assert await page.evaluate("document.documentElement.scrollWidth") <= 1280
        await snap(page, "reports", tmp_path)
        # Subjects are shown by name and found by it.
        name = (await page.locator(".subject-name").first.text_content() or "").strip()
        assert name.startswith("web-")
        await page.get_by_label("Subject (name or digest)").fill(name.upper())
        await page.get_by_role("button", name="Filter").click()
        await expect(page.locator("table.list tbody tr")).to_have_count(1)
        await expect(page.locator("table.list tbody .subject-name")).to_have_text(name)
        await page.goto(f"{base}/reports")
        await page.get_by_label("Result").select_option("fail")
        await page.get_by_role("button", name="Filter").click()
        await expect(page.locator("table.list tbody tr")).to_have_count(1)
        await page.goto(f"{base}/reports/{states['pass']}")
        await page.get_by_role("link", name="Everything about this subject").click()
        await expect(page.get_by_role("heading", level=1)).to_contain_text("Subject")
        history = page.locator("table.list", has_text="Superseded history")
        await expect(history.locator(f'a[href="/reports/{states["superseded"]}"]')).to_have_count(1)
        await snap(page, "subject", tmp_path)
        await browser.close()


async def test_the_api_documentation_works_offline(served: tuple[str, str], tmp_path: Path) -> None:
    base, _ = served
    requested: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("request", lambda request: requested.append(request.url))
        await page.goto(f"{base}/docs")
        finish = page.locator(
            ".opblock-summary-path", has_text="/api/v1/evaluations/{evaluation_id}/finish"
        )
        await expect(finish).to_be_visible(timeout=20_000)
        assert await page.locator(".opblock").count() >= 30
        await snap(page, "api-docs", tmp_path)
        await browser.close()
    outside = [url for url in requested if not url.startswith((base, "data:", "blob:"))]
    assert outside == [], outside
