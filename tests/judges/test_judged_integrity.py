"""The service's own checks of a judged report (docs/judges.md, section 4): verification on
request and the background sweep rebuild each labels root the report binds, its own and its
baseline's, from the stored labels' columns, as an export and both verifiers do."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.platform.config import Settings
from app.platform.metrics import Metrics
from app.workers.sweep import sweep_once
from tests.conftest import Project, auth
from tests.factories import behind_the_triggers
from tests.judges.helpers import (
    define_judged,
    judged_report,
    judged_suite,
    sampled,
    true_labels,
    world,
)


async def _judged(
    project: Project, client: httpx.AsyncClient, rule: str = "threshold"
) -> tuple[dict[str, str], dict[str, Any]]:
    """A judged report of the helpers' suite (with a labelled baseline for a comparison)."""
    headers = await project.admin()
    answer = await define_judged(client, headers, judged_suite(rule=rule))
    assert answer.status_code == 201, answer.text
    labeller = auth(await project.token("label.write", kind="labeller"))
    start: dict[str, Any] = {}
    if rule != "threshold":
        truth, _, _ = world(6)
        baseline = await judged_report(
            client, headers, labeller, true_labels(truth, sampled("accuracy")), 6, mode="experiment"
        )
        start["baseline_evaluation_id"] = baseline["body"]["evaluation_id"]
    truth, _, _ = world(5)
    labels = true_labels(truth, sampled("accuracy"))
    return headers, await judged_report(client, headers, labeller, labels, 5, **start)


async def _verify(
    client: httpx.AsyncClient, headers: dict[str, str], report_id: str
) -> dict[str, Any]:
    answer = await client.post(
        "/evaluations/api/reports/verify", json={"report_id": report_id}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    verified: dict[str, Any] = answer.json()
    return verified


async def _incident_kinds(project: Project, report_id: str) -> list[str]:
    async with project.db() as session:
        kinds = await session.execute(
            text("SELECT kind FROM incidents WHERE report_id = :id"), {"id": report_id}
        )
        return list(kinds.scalars())


@pytest.mark.parametrize("rule", ["threshold", "non_inferiority"])
async def test_a_judged_report_verifies_with_its_labels_roots(
    project: Project, client: httpx.AsyncClient, rule: str
) -> None:
    headers, report = await _judged(project, client, rule)
    calibration = report["body"]["checks"][0]["calibration"]
    assert ("baseline_labels_root" in calibration) is (rule != "threshold")
    verified = await _verify(client, headers, report["report_id"])
    assert verified["verified"] is True, verified["findings"]


@pytest.mark.parametrize(
    ("rule", "side", "key"),
    [
        ("threshold", "e.id", "labels_root"),
        ("non_inferiority", "e.id", "labels_root"),
        ("non_inferiority", "e.baseline_evaluation_id", "baseline_labels_root"),
    ],
)
async def test_a_label_changed_behind_the_triggers_fails_verification(
    project: Project, client: httpx.AsyncClient, database_url: str, rule: str, side: str, key: str
) -> None:
    headers, report = await _judged(project, client, rule)
    await behind_the_triggers(
        database_url,
        uuid.UUID(report["report_id"]),
        "UPDATE labels SET labeller = 'mallory' WHERE check_id = 'accuracy' "
        f"AND example_id = '{sampled('accuracy')[0]}' "
        f"AND evaluation_id = (SELECT {side} FROM reports r JOIN evaluations e "
        "ON e.id = r.evaluation_id WHERE r.id = $1)",
    )
    verified = await _verify(client, headers, report["report_id"])
    assert verified["verified"] is False
    assert verified["failed"] == ["labels"]
    assert verified["findings"] == [f"labels: the labels of 'accuracy' no longer rebuild its {key}"]
    assert await _incident_kinds(project, report["report_id"]) == ["labels_mismatch"]


async def test_the_sweep_finds_a_label_removed_behind_the_triggers(
    project: Project, client: httpx.AsyncClient, db: Any, settings: Settings, database_url: str
) -> None:
    headers, report = await _judged(project, client)
    await behind_the_triggers(
        database_url,
        uuid.UUID(report["report_id"]),
        "DELETE FROM labels WHERE check_id = 'accuracy' "
        f"AND example_id = '{sampled('accuracy')[-1]}' "
        "AND evaluation_id = (SELECT evaluation_id FROM reports WHERE id = $1)",
    )
    every_report = settings.model_copy(
        update={"verify_sweep_every_hours": 1e-9, "verify_sweep_batch": 100_000}
    )
    swept = await sweep_once(db, every_report, Metrics())
    assert swept.swept and swept.failed >= 1
    assert await _incident_kinds(project, report["report_id"]) == ["labels_mismatch"]
    health = (await client.get("/evaluations/api/health/evaluator", headers=headers)).json()
    assert [
        i["kind"] for i in health["open_incidents"] if i["report_id"] == report["report_id"]
    ] == ["labels_mismatch"]


async def test_many_labels_are_hashed_on_a_thread_alike(
    project: Project,
    client: httpx.AsyncClient,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.services import integrity

    monkeypatch.setattr(integrity, "LABELS_ON_THE_LOOP", 0)
    headers, report = await _judged(project, client)
    assert (await _verify(client, headers, report["report_id"]))["verified"] is True
    await behind_the_triggers(
        database_url,
        uuid.UUID(report["report_id"]),
        "UPDATE labels SET labeller = 'mallory' WHERE check_id = 'accuracy' "
        "AND evaluation_id = (SELECT evaluation_id FROM reports WHERE id = $1)",
    )
    verified = await _verify(client, headers, report["report_id"])
    assert verified["findings"] == [
        "labels: the labels of 'accuracy' no longer rebuild its labels_root"
    ]


async def test_a_body_naming_no_baseline_is_a_finding_not_a_query(db: Any) -> None:
    """A body changed behind the service may name no baseline (its digest fails as well): the
    labels part says so rather than asking the database for the labels of no evaluation."""
    from app.digest import merkle
    from app.services import integrity

    empty = merkle.hex_digest(merkle.EMPTY_ROOT)
    body = {
        "checks": [
            {
                "check_id": "accuracy",
                "calibration": {"labels_root": empty, "baseline_labels_root": empty},
                "comparison": {"baseline_evaluation_id": "not an id"},
            }
        ]
    }
    async with db() as session:
        found = await integrity.labels_findings(session, uuid.uuid4(), body)
    assert [str(f) for f in found] == [
        "labels: 'accuracy' binds a baseline_labels_root of no baseline evaluation"
    ]
