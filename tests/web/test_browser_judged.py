"""A judged check's report in a real headless Chromium against `evalbook serve` (docs/judges.md,
section 5): the corrected score beside the judge's own, n of N and the agreement table shown,
the labels still needed and their link followed to the page listing what to label, with
inputs and outputs for a reader who may see bodies; screenshots as in tests/web/test_browser.py."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import async_playwright, expect

from tests.conftest import cli_admin_token
from tests.judges.helpers import define_judged, judged_report, sampled, true_labels, world
from tests.web.browser_kit import CHROMIUM_ARGS, chromium, snap


async def _seed(base: str, token: str) -> tuple[dict[str, Any], str]:
    """A judged report with 30 of the accuracy check's sampled examples labelled; a reader's
    token that may see bodies."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        assert (await define_judged(client, headers)).status_code == 201
        made = await client.post(
            "/api/v1/tokens",
            json={"name": "labeller", "permissions": ["label.write"], "kind": "labeller"},
            headers=headers,
        )
        assert made.status_code == 201, made.text
        labeller = {"Authorization": f"Bearer {made.json()['token']}"}
        truth, _, _ = world()
        labels = true_labels(truth, sampled("accuracy")[:30])
        report = await judged_report(client, headers, labeller, labels)
        reader = await client.post(
            "/api/v1/tokens",
            json={"name": "reader", "permissions": ["report.read", "dataset.read_body"]},
            headers=headers,
        )
        assert reader.status_code == 201, reader.text
        return report, reader.json()["token"]


async def test_a_judged_report_shows_its_correction_and_what_to_label(
    served: tuple[str, str], database_url: str, tmp_path: Path
) -> None:
    base, _ = served
    admin = cli_admin_token(database_url, f"review/judged-{uuid.uuid4().hex[:6]}")
    report, token = await _seed(base, admin)
    accuracy = report["body"]["checks"][0]
    calibration = accuracy["calibration"]
    missing = accuracy["coverage"]["labels_missing"]
    assert missing == len(sampled("accuracy")) - 30
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        target = f"/reports/{report['report_id']}"
        await page.goto(f"{base}/signin?next={target}")
        await page.get_by_label("API token").fill(token)
        await page.get_by_label("API token").press("Enter")
        await expect(page).to_have_url(f"{base}{target}")
        judged = page.locator("#judged-1")
        await expect(judged).to_be_visible()
        await expect(judged).to_contain_text(f"corrected by human labels {accuracy['score']:.4g}")
        await expect(judged).to_contain_text(f"the judge alone {calibration['judge_score']:.4g}")
        await expect(judged).to_contain_text(f"{calibration['labelled']} of 200 examples labelled")
        table = calibration["agreement"]["table"]
        rows = judged.locator("table.agreement tbody tr")
        await expect(rows).to_have_count(2)
        await expect(rows.first.locator("td")).to_have_text(
            [str(table["judge_pass_label_pass"]), str(table["judge_pass_label_fail"])]
        )
        await expect(rows.last.locator("td")).to_have_text(
            [str(table["judge_fail_label_pass"]), str(table["judge_fail_label_fail"])]
        )
        await expect(judged.locator(".labels-needed")).to_contain_text(
            f"{missing} sampled examples without a label"
        )
        await snap(page, "judged-report", tmp_path)

        await judged.get_by_role("link", name="The examples to label").click()
        evaluation_id = report["body"]["evaluation_id"]
        await expect(page).to_have_url(f"{base}/evaluations/{evaluation_id}/labels")
        listed = page.locator("table.requested tbody tr")
        await expect(listed).to_have_count(100)
        first = sampled("accuracy")[0]
        await expect(listed.first).to_contain_text(f"question {first}")
        await expect(page.locator("ul.totals")).to_contain_text(
            f"accuracy: 30 of {len(sampled('accuracy'))} sampled examples labelled"
        )
        await snap(page, "labels", tmp_path)
        await browser.close()
