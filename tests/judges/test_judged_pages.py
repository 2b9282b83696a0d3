"""Judged checks on the pages (docs/judges.md, section 5): the report page shows the corrected
score beside the judge's own, λ, n of N and the agreement table read from the stored body, says
how many labels are still needed and links to the page listing the examples to label, which
shows inputs and outputs only to a reader who may see bodies."""

from __future__ import annotations

import html
import re

import httpx

from tests.conftest import Project
from tests.judges.helpers import sampled, true_labels, world
from tests.judges.test_judged_reports import _finished_with, _rater_labels
from tests.pages_helpers import sign_in


def _judged_block(page: str, index: int) -> str:
    match = re.search(rf'<div class="judged" id="judged-{index}">(.*?)\n</div>', page, re.S)
    assert match, page
    return html.unescape(re.sub(r"<[^>]+>", " ", match.group(1)))


def _words(text: str) -> str:
    return " ".join(text.split())


async def test_the_report_page_shows_the_correction_and_its_agreement(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    truth, _, _ = world()
    labels = true_labels(truth, sampled("accuracy")) + _rater_labels(truth)
    report, _ = await _finished_with(project, client, labels)
    accuracy = report["body"]["checks"][0]
    calibration = accuracy["calibration"]
    await sign_in(browser, await project.token("report.read"))
    page = await browser.get(f"/reports/{report['report_id']}")
    assert page.status_code == 200
    block = _words(_judged_block(page.text, 1))
    interval = accuracy["interval"]
    assert (
        f"corrected by human labels {accuracy['score']:.4g} "
        f"[{interval['lower']:.4g}, {interval['upper']:.4g}]"
    ) in block
    assert f"the judge alone {calibration['judge_score']:.4g}" in block
    assert "the judge is biased" in block
    assert f"{calibration['labelled']} of 200 examples labelled (25 % sampled)" in block
    assert f"λ {calibration['lambda']:.3g}" in block
    table = calibration["agreement"]["table"]
    assert (
        f"pass {table['judge_pass_label_pass']} {table['judge_pass_label_fail']} "
        f"fail {table['judge_fail_label_pass']} {table['judge_fail_label_fail']}"
    ) in block
    assert f"κ {calibration['agreement']['kappa']:.3g}" in block
    assert "Labels still needed" not in block
    # The mean check shows its bias; the unjudged check shows no judged block.
    bias = report["body"]["checks"][1]["calibration"]["agreement"]["bias"]
    assert f"the judge's bias (judge − label) {bias:+.3g}" in _words(_judged_block(page.text, 2))
    assert 'id="judged-3"' not in page.text


async def test_missing_labels_are_counted_and_linked_to_the_list(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    truth, _, _ = world()
    report, _ = await _finished_with(project, client, true_labels(truth, sampled("accuracy")[:4]))
    evaluation_id = report["body"]["evaluation_id"]
    missing = len(sampled("accuracy")) - 4
    await sign_in(browser, await project.token("report.read"))
    page = await browser.get(f"/reports/{report['report_id']}")
    block = _words(_judged_block(page.text, 1))
    assert "6 more labels before the corrected verdict can decide (at least 10)" in block
    assert f"{missing} sampled examples without a label" in block
    assert f'href="/evaluations/{evaluation_id}/labels"' in page.text

    listing = await browser.get(f"/evaluations/{evaluation_id}/labels")
    assert listing.status_code == 200
    text = _words(html.unescape(re.sub(r"<[^>]+>", " ", listing.text)))
    assert f"accuracy : 4 of {len(sampled('accuracy'))} sampled examples labelled" in text
    first = sampled("accuracy")[0]
    assert f"accuracy {first}" in text
    assert "inputs and outputs need dataset.read_body" in text
    assert "question " not in text
    # The first page holds 100 of the 100 sampled examples; a second page continues the list.
    assert 'rel="next"' in listing.text
    cursor = re.search(r'href="([^"]+)" rel="next"', listing.text)
    assert cursor
    more = await browser.get(html.unescape(cursor.group(1)))
    assert more.status_code == 200 and "helpfulness" in more.text

    bad = await browser.get(f"/evaluations/{evaluation_id}/labels", params={"cursor": "nope"})
    assert bad.status_code == 400


async def test_the_list_shows_bodies_to_a_reader_who_may_see_them(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient, other_project: Project
) -> None:
    report, _ = await _finished_with(project, client, [])
    evaluation_id = report["body"]["evaluation_id"]
    await sign_in(browser, await project.token("report.read", "dataset.read_body"))
    listing = await browser.get(f"/evaluations/{evaluation_id}/labels")
    first = sampled("accuracy")[0]
    assert f"question {first}" in html.unescape(listing.text)
    assert f'"a": "{first}"' in html.unescape(listing.text)

    await sign_in(browser, await other_project.token("report.read"))
    elsewhere = await browser.get(f"/evaluations/{evaluation_id}/labels")
    assert elsewhere.status_code == 404
