"""Chromium for the browser tests: where it is, how it is started, and screenshots."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from playwright.async_api import Page


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
