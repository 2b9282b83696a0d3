"""The label changes between two reports of a judged check (docs/changes.md, labels): per check
judged in both, the examples whose human label changed, those labelled in one report only, and
the judge's own score and the labels' roots on both sides."""

from __future__ import annotations

from typing import Any

import orjson

from app.platform.db import ReadConnection
from app.repositories import labels as label_repo
from app.services.diff_checks import Side

SHOWN = 100  # examples listed per kind of change; the counts are always whole


def judged_in_both(after: Side, before: Side) -> list[str]:
    """The checks judged (with calibration) in both reports' suites, in `after`'s order."""
    return [
        check_id
        for check_id, definition in after.definitions.items()
        if "calibration" in definition and "calibration" in (before.definitions.get(check_id) or {})
    ]


def _side(side: Side, check_id: str) -> dict[str, Any]:
    """A judged check on one side: θ, the judge's score, the labels counted and their root."""
    check = side.check(check_id)
    calibration = check.get("calibration") or {}
    return {
        "score": check.get("score"),
        "judge_score": calibration.get("judge_score"),
        "labelled": calibration.get("labelled"),
        "labels_root": calibration.get("labels_root"),
    }


def _compare(
    before: dict[str, tuple[Any, str]], after: dict[str, tuple[Any, str]]
) -> dict[str, Any]:
    """What changed from one check's labels (example -> (label, labeller)) to the other's."""
    changed = [
        {
            "example_id": example_id,
            "before": before[example_id][0],
            "after": label,
            "labeller_before": before[example_id][1],
            "labeller_after": labeller,
        }
        for example_id, (label, labeller) in after.items()
        if example_id in before and before[example_id][0] != label
    ]
    added = [example_id for example_id in after if example_id not in before]
    dropped = [example_id for example_id in before if example_id not in after]
    both = sum(1 for example_id in after if example_id in before)
    return {
        "changed_count": len(changed),
        "changed": changed[:SHOWN],
        "only_after_count": len(added),
        "only_after": added[:SHOWN],
        "only_before_count": len(dropped),
        "only_before": dropped[:SHOWN],
        "unchanged": both - len(changed),
    }


async def _labels(
    connection: ReadConnection, side: Side, check_id: str
) -> dict[str, tuple[Any, str]]:
    rows = await label_repo.of_check(connection, side.evaluation_id, check_id)
    return {row["example_id"]: (orjson.loads(row["label"]), row["labeller"]) for row in rows}


async def label_changes(
    connection: ReadConnection, sides: tuple[Side, Side]
) -> list[dict[str, Any]]:
    """Per check judged in both reports, how its human labels changed (example id order)."""
    after, before = sides
    answers = []
    for check_id in judged_in_both(after, before):
        was = await _labels(connection, before, check_id)
        now = await _labels(connection, after, check_id)
        answers.append(
            {
                "check_id": check_id,
                "before": _side(before, check_id),
                "after": _side(after, check_id),
                **_compare(was, now),
            }
        )
    return answers
