"""End to end in a real headless Chromium (Debian's package) driven by Playwright, against
`evalbook serve` in its own process: sign in, open reports in every state, verify, export
and download a bundle, follow supersession links. Screenshots of each state are kept in
EVALBOOK_SCREENSHOT_DIR (`make screenshots` points it at docs/screenshots/)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, async_playwright, expect

from tests.browser_states import seed
from tests.bundle_helpers import REPO, node_verify, python_verify
from tests.conftest import MotoServer, cli_admin_token, free_port, wait_ready


def chromium() -> str:
    """Debian's Chromium, a stated prerequisite of the tests (README): never installed from
    here; `.ci/run` and `make test` install it."""
    found = shutil.which("chromium")
    assert found, "these tests need Chromium on the PATH (Debian: apt-get install chromium)"
    return found


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def served(
    database_url: str,
    moto_server: MotoServer,
    tmp_path_factory: pytest.TempPathFactory,
    signing_key_file: Path,
) -> Iterator[tuple[str, str]]:
    """`evalbook serve` on a free port; (base URL, an admin token of the demo project)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "EVALBOOK_DATABASE_URL": database_url,
        "EVALBOOK_DATA_DIR": str(tmp_path_factory.mktemp("served")),
        "EVALBOOK_SIGNING_KEY_FILE": str(signing_key_file),
        "EVALBOOK_S3_ENDPOINT_URL": moto_server.url,
        "EVALBOOK_S3_BUCKET": "evalbook-browser",
        "EVALBOOK_S3_ACCESS_KEY_ID": "test",
        "EVALBOOK_S3_SECRET_ACCESS_KEY": "test",
        "EVALBOOK_PUBLIC_BASE_URL": base,
        "EVALBOOK_NOTIFICATIONS_ENABLED": "false",
        "EVALBOOK_LOG_LEVEL": "warning",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    # Everything the service prints is read as it comes (a pipe nobody reads stalls the
    # service once full) and kept, to show if it never becomes ready.
    output: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: output.extend(process.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        # Its first line (the start-up is under way) before the project is made by the CLI.
        deadline = time.monotonic() + 60
        while not output and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        token = cli_admin_token(database_url)
        try:
            wait_ready(base)
        except AssertionError:
            raise AssertionError("".join(output)[-5000:]) from None
        yield base, token
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError("".join(output)[-5000:]) from None


def shots() -> Path | None:
    """Where screenshots go, if anywhere."""
    target = os.environ.get("EVALBOOK_SCREENSHOT_DIR")
    if not target:
        return None
    path = Path(target)
    path.mkdir(parents=True, exist_ok=True)
    return path


async def snap(page: Page, name: str, tmp_path: Path) -> None:
    """A full-page screenshot: always as a test artifact, and where `make screenshots` asks."""
    await page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    target = shots()
    if target is not None:
        shutil.copy(tmp_path / f"{name}.png", target / f"{name}.png")


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
        await snap(page, "reports", tmp_path)
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
