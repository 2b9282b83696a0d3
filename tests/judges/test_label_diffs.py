"""Label changes in the diff of two reports of a judged check (docs/judges.md, section 4;
docs/changes.md): the examples whose label changed, those labelled on one side only, the judge's
own score and the corrected one on both sides, in the API's answer and in `evalbook diff`."""

from __future__ import annotations

import html
import re

import httpx

from app.api.main import create_app
from app.platform.config import Settings
from tests.clients.test_gate import cli_against
from tests.conftest import Project, auth
from tests.judges.helpers import define_judged, judged_report, sampled, true_labels, world
from tests.pages_helpers import sign_in
from tests.served import uvicorn_serving


async def test_the_diff_lists_label_changes(
    project: Project, client: httpx.AsyncClient, settings: Settings, browser: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    assert (await define_judged(client, headers)).status_code == 201
    labeller = auth(await project.token("label.write", kind="labeller"))
    truth, _, _ = world()
    chosen = sampled("accuracy")
    before_labels = true_labels(truth, chosen[:40])
    # After: the first three examples relabelled the other way by another person, the
    # examples 40 to 44 labelled as well, and the last two of the 40 left out.
    after_labels = [
        {**label, "label": "fail" if label["label"] == "pass" else "pass", "labeller": "ben"}
        for label in before_labels[:3]
    ]
    after_labels += before_labels[3:38] + true_labels(truth, chosen[40:45])
    before = await judged_report(
        client, headers, labeller, before_labels, subject={"digest": "sha1:" + "a" * 40}
    )
    after = await judged_report(
        client, headers, labeller, after_labels, subject={"digest": "sha1:" + "b" * 40}
    )
    found = await client.get(
        f"/evaluations/api/reports/{after['report_id']}/diff/{before['report_id']}",
        headers=headers,
    )
    assert found.status_code == 200, found.text
    judged, unlabelled = found.json()["labels"]
    assert judged["check_id"] == "accuracy"
    assert judged["changed_count"] == 3
    assert [c["example_id"] for c in judged["changed"]] == chosen[:3]
    first = judged["changed"][0]
    assert first["before"] == before_labels[0]["label"] and first["labeller_after"] == "ben"
    assert first["after"] == after_labels[0]["label"] and first["labeller_before"] == "ana"
    assert judged["only_after"] == chosen[40:45] and judged["only_after_count"] == 5
    assert judged["only_before"] == chosen[38:40] and judged["only_before_count"] == 2
    assert judged["unchanged"] == 35
    accuracy = {c["check_id"]: c for c in after["body"]["checks"]}["accuracy"]
    assert judged["after"] == {
        "score": accuracy["score"],
        "judge_score": accuracy["calibration"]["judge_score"],
        "labelled": 43,
        "labels_root": accuracy["calibration"]["labels_root"],
    }
    assert judged["before"]["labelled"] == 40
    # The mean check is judged in both, with no label on either side: listed, nothing changed.
    assert unlabelled["check_id"] == "helpfulness"
    assert unlabelled["changed"] == [] and unlabelled["unchanged"] == 0
    assert unlabelled["only_after_count"] == unlabelled["only_before_count"] == 0

    reader = await project.token("report.read")
    async with uvicorn_serving(create_app(settings)) as port:
        code, out = await cli_against(port, reader, "diff", after["report_id"], before["report_id"])
    assert code == 0, out
    assert "labels of accuracy (judged): 40 -> 43 labelled" in out
    assert "3 changed, 5 labelled after only, 2 before only, 35 unchanged" in out
    assert f"  {chosen[0]}: {first['before']} (ana) -> {first['after']} (ben)" in out

    await sign_in(browser, reader)
    page = await browser.get(f"/reports/{after['report_id']}/compare/{before['report_id']}")
    assert page.status_code == 200
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())
    assert "accuracy (judged: its human labels)" in text
    assert "40 → 43 labels. 3 changed, 5 labelled after only, 2 before only, 35 unchanged" in text
    assert f"{chosen[0]} {first['before']} (ana) {first['after']} (ben)" in text
    assert f"Labelled before only: {chosen[38]}, {chosen[39]}" in text
