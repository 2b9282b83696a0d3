"""The top regressions the gate shows for a failed or inconclusive check: from the diff of the
report against its baseline's report, or else against the report it superseded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.cli.diff import regressions, report_diff

if TYPE_CHECKING:
    from app.cli.client import EvalBookClient

TOP = 5
WANTED = ("fail", "inconclusive")


@dataclass
class Regressions:
    """Per check id, its worst regressions in words, and which report they are against."""

    against: str
    against_id: str
    by_check: dict[str, list[str]] = field(default_factory=dict)


def _baseline_report(client: EvalBookClient, body: dict[str, Any]) -> str | None:
    for check in body.get("checks", []):
        baseline = (check.get("comparison") or {}).get("baseline_evaluation_id")
        if baseline:
            report: dict[str, Any] = client.request("GET", f"/api/v1/evaluations/{baseline}/report")
            return str(report["report_id"])
    return None


def _superseded_report(client: EvalBookClient, report: dict[str, Any]) -> str | None:
    body = report["body"]
    listed = client.request(
        "GET",
        "/evaluations/api/reports",
        params={
            "subject_digest": body["subject"]["digest"],
            "suite": body["suite_ref"]["name"],
            "status": "superseded",
            "view": "summary",
            "limit": 20,
        },
    )
    for item in listed.get("reports", []):
        if item.get("envelope", {}).get("superseded_by") == report["report_id"]:
            return str(item["report_id"])
    return None


def find_regressions(client: EvalBookClient, report: dict[str, Any]) -> Regressions | None:
    """The worst regressions of the report's failed or inconclusive checks (None when it has
    none, or nothing to compare with)."""
    body = report["body"]
    wanted = [c["check_id"] for c in body.get("checks", []) if c["result"] in WANTED]
    if not wanted:
        return None
    against, other = "baseline", _baseline_report(client, body)
    if other is None:
        against, other = "superseded report", _superseded_report(client, report)
    if other is None:
        return None
    diff = report_diff(client, report["report_id"], other)
    found = Regressions(against, other)
    for check in diff["checks"]:
        if check["check_id"] in wanted:
            worst = regressions(check, TOP)
            if worst:
                found.by_check[check["check_id"]] = worst
    return found
