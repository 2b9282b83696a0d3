"""Bundles of judged reports (docs/judges.md, section 4): label lines with their notes (redacted
without dataset.read_body), both verifiers recomputing the sample and the labels' roots, and
--replay the corrected verdict; every resealed forgery of a label refused by both with the same
failure codes."""

from __future__ import annotations

import gzip
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import text

from tests.bundle_helpers import download, export, lines_of, node_verify, python_verify
from tests.bundles.edits import canonical, reseal
from tests.conftest import Project, auth
from tests.factories import behind_the_triggers, problem
from tests.judges.helpers import (
    EXAMPLES,
    define_judged,
    judged_report,
    judged_suite,
    sampled,
    true_labels,
    world,
)


async def _judged_report(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    labeller: dict[str, str],
    seed: int,
    **start: Any,
) -> dict[str, Any]:
    truth, _, _ = world(seed)
    labels = true_labels(truth, sampled("accuracy"))
    labels[0]["note"] = "ambiguous question; judged by the reference answer"
    labels += [
        {"check_id": "helpfulness", "example_id": e, "label": 0.5, "labeller": "ben"}
        for e in sampled("helpfulness")
    ]
    return await judged_report(client, headers, labeller, labels, seed, **start)


async def _bundle(
    project: Project, client: httpx.AsyncClient, tmp_path: Path, rule: str = "threshold"
) -> tuple[Path, dict[str, str], dict[str, Any]]:
    headers = await project.admin()
    answer = await define_judged(client, headers, judged_suite(rule=rule))
    assert answer.status_code == 201, answer.text
    labeller = auth(await project.token("label.write", kind="labeller"))
    start: dict[str, Any] = {}
    if rule != "threshold":
        baseline = await _judged_report(client, headers, labeller, 6, mode="experiment")
        start["baseline_evaluation_id"] = baseline["body"]["evaluation_id"]
    report = await _judged_report(client, headers, labeller, 5, **start)
    record = await export(client, headers, report["report_id"])
    path = await download(client, headers, record["bundle_id"], tmp_path / "judged.jsonl.gz")
    return path, headers, report


@pytest.mark.parametrize("rule", ["threshold", "non_inferiority"])
async def test_bundles_of_judged_reports_verify_and_replay(
    project: Project, client: httpx.AsyncClient, tmp_path: Path, rule: str
) -> None:
    path, _, report = await _bundle(project, client, tmp_path, rule)
    lines = lines_of(path)
    labels = [line for line in lines if line["kind"] == "label"]
    assert len(labels) == len(sampled("accuracy")) + len(sampled("helpfulness"))
    assert labels[0]["note"].startswith("ambiguous")
    if rule != "threshold":
        assert [line for line in lines if line["kind"] == "baseline_label"]
        assert report["body"]["checks"][0]["comparison"]["method"] == "ppi_plus_plus_z"
    code, outcome = python_verify(path, "--replay")
    assert code == 0, outcome["failures"]
    assert outcome["replay"].startswith("matched"), outcome
    node_code, node_outcome = node_verify(path)
    assert node_code == 0, node_outcome["failures"]
    assert outcome["proven"]["labels_root"] == node_outcome["proven"]["labels_root"] >= 2


async def test_a_bundle_for_a_reader_without_bodies_redacts_the_notes(
    project: Project, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    _, _, report = await _bundle(project, client, tmp_path)
    exporter = auth(await project.token("report.export", "report.read"))
    record = await export(client, exporter, report["report_id"])
    redacted = await download(client, exporter, record["bundle_id"], tmp_path / "r.jsonl.gz")
    lines = lines_of(redacted)
    assert not [line for line in lines if line["kind"] == "label" and "note" in line]
    items = next(line for line in lines if line["kind"] == "redacted")["items"]
    assert {
        "what": "label_notes",
        "ref": {"check_id": "accuracy", "kind": "label"},
        "reason": "permission",
        "count": 1,
    } in items
    assert python_verify(redacted, "--replay")[0] == 0
    assert node_verify(redacted)[0] == 0


async def test_a_stored_label_changed_behind_the_triggers_stops_the_export(
    project: Project, client: httpx.AsyncClient, database_url: str
) -> None:
    """The writer rebuilds each judged check's labels root from the stored labels: one changed
    by someone with database access is an integrity finding, a 409 and no bundle."""
    headers = await project.admin()
    assert (await define_judged(client, headers)).status_code == 201
    labeller = auth(await project.token("label.write", kind="labeller"))
    report = await _judged_report(client, headers, labeller, 5)
    await behind_the_triggers(
        database_url,
        uuid.UUID(report["report_id"]),
        "UPDATE labels SET labeller = 'mallory' WHERE check_id = 'accuracy' "
        f"AND example_id = '{sampled('accuracy')[0]}' "
        "AND evaluation_id = (SELECT evaluation_id FROM reports WHERE id = $1)",
    )
    refused = await client.post(
        "/evaluations/api/reports/bundle", json={"report_id": report["report_id"]}, headers=headers
    )
    found = problem(refused, 409)
    assert "the labels of 'accuracy' no longer rebuild its labels_root" in found["detail"]
    async with project.db() as session:
        kinds = (
            await session.execute(
                text("SELECT kind FROM incidents WHERE report_id = :id"),
                {"id": report["report_id"]},
            )
        ).scalars()
        assert list(kinds) == ["labels_mismatch"]


def _forged(path: Path, to: Path, change: Callable[[list[dict[str, Any]]], None]) -> Path:
    values = [orjson.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    change(values)
    to.write_bytes(
        gzip.compress(b"".join(line + b"\n" for line in reseal([canonical(v) for v in values])))
    )
    return to


def _first_label(values: list[dict[str, Any]], check_id: str = "accuracy") -> dict[str, Any]:
    return next(v for v in values if v["kind"] == "label" and v["check_id"] == check_id)


def _flip(values: list[dict[str, Any]]) -> None:
    label = _first_label(values)
    label["label"] = "fail" if label["label"] == "pass" else "pass"


def _outside(values: list[dict[str, Any]]) -> None:
    """The first label moved to an example the sample does not hold, still in example order."""
    label = _first_label(values)
    chosen = set(sampled("accuracy"))
    label["example_id"] = max(e for e in EXAMPLES if e not in chosen and e < label["example_id"])


def _dropped(values: list[dict[str, Any]]) -> None:
    values.remove(_first_label(values))


def _weaker(values: list[dict[str, Any]]) -> None:
    _first_label(values)["assurance"] = "reported"


def _relabelled(values: list[dict[str, Any]]) -> None:
    _first_label(values)["labeller"] = "mallory"


def _mean_word(values: list[dict[str, Any]]) -> None:
    _first_label(values, "helpfulness")["label"] = "pass"


def _on_unjudged(values: list[dict[str, Any]]) -> None:
    at = next(i for i, v in enumerate(values) if v["kind"] == "check" and v["check_id"] == "format")
    end = next(i for i in range(at + 1, len(values)) if values[i]["kind"] not in ("case",))
    values.insert(end, {**_first_label(values), "check_id": "format"})


def _twice(values: list[dict[str, Any]]) -> None:
    label = _first_label(values)
    values.insert(values.index(label) + 1, dict(label))


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (_flip, "labels_root"),
        (_relabelled, "labels_root"),
        (_dropped, "labels_root"),
        (_outside, "label_sample"),
        (_weaker, "label_assurance"),
        (_mean_word, "malformed"),
        (_on_unjudged, "label"),
        (_twice, "duplicate"),
    ],
)
async def test_forged_labels_are_refused_alike_by_both_verifiers(
    project: Project,
    client: httpx.AsyncClient,
    tmp_path: Path,
    change: Callable[[list[dict[str, Any]]], None],
    code: str,
) -> None:
    path, _, _ = await _bundle(project, client, tmp_path)
    forged = _forged(path, tmp_path / "forged.jsonl.gz", change)
    py_code, outcome = python_verify(forged)
    node_code, node_outcome = node_verify(forged)
    assert py_code == node_code == 1, (outcome, node_outcome)
    codes = {f["code"] for f in outcome["failures"]}
    assert codes == {f["code"] for f in node_outcome["failures"]}
    assert code in codes, outcome["failures"]
    assert [f["what"] for f in outcome["failures"]] == [f["what"] for f in node_outcome["failures"]]
