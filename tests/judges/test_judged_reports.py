"""Judged checks decided by the service (docs/judges.md, sections 3 and 4): a lenient judge
corrected by its labels to the number ppi-python 0.2.3 computes, the labels bound by their root,
and a sample short of labels keeping the report from passing."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import ppi_py
import pytest
from sklearn.metrics import cohen_kappa_score

from app.domain.labels import labels_root
from tests.conftest import Project, auth
from tests.judges.helpers import (
    EXAMPLES,
    define_judged,
    judged_report,
    sampled,
    true_labels,
    world,
)


async def _finished_with(
    project: Project, client: httpx.AsyncClient, labels: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, str]]:
    headers = await project.admin()
    assert (await define_judged(client, headers)).status_code == 201
    labeller = auth(await project.token("label.write", kind="labeller"))
    return await judged_report(client, headers, labeller, labels), headers


def _rater_labels(truth: dict[str, bool]) -> list[dict[str, Any]]:
    return [
        {
            "check_id": "helpfulness",
            "example_id": e,
            "label": 0.9 if truth[e] else 0.2,
            "labeller": "ben",
            "note": "read twice",
        }
        for e in sampled("helpfulness")
    ]


async def test_a_lenient_judge_is_corrected_to_ppi_pythons_numbers(
    project: Project, client: httpx.AsyncClient
) -> None:
    truth, judge, rater = world()
    labels = true_labels(truth, sampled("accuracy")) + _rater_labels(truth)
    report, _ = await _finished_with(project, client, labels)
    body = report["body"]
    accuracy, helpfulness = body["checks"][0], body["checks"][1]
    chosen = sampled("accuracy")
    others = [e for e in EXAMPLES if e not in set(chosen)]
    y = np.array([float(truth[e]) for e in chosen])
    yhat = np.array([float(judge[e]) for e in chosen])
    yhat_u = np.array([float(judge[e]) for e in others])
    theta = float(np.asarray(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u)).item())
    lower, upper = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05)
    assert accuracy["score"] == pytest.approx(theta, abs=1e-9)
    assert accuracy["interval"]["lower"] == pytest.approx(max(0.0, lower[0]), abs=1e-9)
    assert accuracy["interval"]["upper"] == pytest.approx(min(1.0, upper[0]), abs=1e-9)
    calibration = accuracy["calibration"]
    assert calibration["labelled"] == len(chosen)
    assert calibration["unlabelled"] == len(others)
    assert calibration["judge_score"] == pytest.approx(np.mean(list(judge.values())), abs=1e-11)
    assert calibration["agreement"]["kappa"] == pytest.approx(cohen_kappa_score(yhat, y), abs=1e-9)
    bound = [{**label, "assurance": "human_attested"} for label in labels[: len(chosen)]]
    assert calibration["labels_root"] == labels_root(bound)
    # The judge alone would pass the check; the labels fail it.
    assert calibration["judge_score"] >= 0.75 > accuracy["score"]
    assert accuracy["status"] == "fail" and body["result"] == "fail"
    assert any(o["code"] == "judge_bias" for o in accuracy["observations"])
    assert accuracy["assurance"] == "human_attested"
    assert accuracy["coverage"]["labels_missing"] == 0
    mean_labels = np.array([0.9 if truth[e] else 0.2 for e in sampled("helpfulness")])
    mean_judged = np.array([rater[e] for e in sampled("helpfulness")])
    rest = np.array([rater[e] for e in EXAMPLES if e not in set(sampled("helpfulness"))])
    theta = float(np.asarray(ppi_py.ppi_mean_pointestimate(mean_labels, mean_judged, rest)).item())
    assert helpfulness["score"] == pytest.approx(theta, abs=1e-9)
    assert helpfulness["calibration"]["agreement"]["bias"] == pytest.approx(
        float(np.mean(mean_judged - mean_labels)), abs=1e-11
    )
    assert "calibration" not in body["checks"][2]


async def test_a_sample_short_of_labels_keeps_the_report_from_passing(
    project: Project, client: httpx.AsyncClient
) -> None:
    truth, _, _ = world()
    report, _ = await _finished_with(project, client, true_labels(truth, sampled("accuracy")[:4]))
    body = report["body"]
    accuracy = body["checks"][0]
    assert accuracy["status"] == "inconclusive"
    assert "too_few_labels" in accuracy["explanation"]
    missing = len(sampled("accuracy")) - 4
    assert accuracy["coverage"]["labels_missing"] == missing
    assert {"code": "labels_missing", "check_id": "accuracy", "missing": missing} in body["reasons"]
    assert body["result"] != "pass" and not body["evidence_complete"]
    assert body["checks"][1]["calibration"]["labels_root"] == labels_root([])
