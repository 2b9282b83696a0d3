"""What the templates show, built from stored report bodies and envelopes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from app.web.charts import IntervalChart, Segment, coverage_bar, interval_chart

RESULT_WORDS = {
    "pass": "Pass",
    "fail": "Fail",
    "error": "Error",
    "inconclusive": "Inconclusive",
    "missing": "Missing",
    "stale": "Stale",
}
RESULT_ICONS = {"pass": "✓", "fail": "✗", "error": "!", "inconclusive": "?"}


def when(moment: str | datetime | None) -> str:
    """A time as people read it: UTC, to the second."""
    if moment is None:
        return ""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def reason_text(reason: dict[str, Any]) -> str:
    """One sentence per reason code of the body."""
    code = reason.get("code", "")
    check = reason.get("check_id", "")
    if code == "evidence_incomplete":
        return (
            f"Evidence for {check} is incomplete: {reason.get('missing', 0)} examples not "
            f"executed, {reason.get('undigested', 0)} scored cases without an output digest."
        )
    if code.startswith("check_"):
        result = code.removeprefix("check_")
        return f"Required check {check} is {result} (status {reason.get('status')})."
    return json.dumps(reason, ensure_ascii=False)


@dataclass
class ResultView:
    """A check or one of its slices."""

    name: str
    is_slice: bool
    required: bool
    status: str
    result: str
    score: float | None
    chart: IntervalChart
    coverage: dict[str, int]
    segments: list[Segment]
    comparison: dict[str, Any] | None
    explanation: str = ""
    assurance: str = ""
    method: str = ""
    threshold: float | None = None
    evidence_manifest: bool = False
    observations: list[dict[str, Any]] = field(default_factory=list)


def check_views(check: dict[str, Any]) -> list[ResultView]:
    """A check's row, then one row per slice under it."""
    aggregation = check.get("aggregation") or {}
    method = aggregation.get("method", "")
    threshold = aggregation.get("threshold")
    observations = check.get("observations") or []
    rows = [
        ResultView(
            name=check["check_id"],
            is_slice=False,
            required=check.get("required", True),
            status=check["status"],
            result=check["result"],
            score=check.get("score"),
            chart=interval_chart(check, method, threshold),
            coverage=check.get("coverage") or {},
            segments=coverage_bar(check.get("coverage") or {}, observations),
            comparison=check.get("comparison"),
            explanation=check.get("explanation", ""),
            assurance=check.get("assurance", ""),
            method=method,
            threshold=threshold,
            evidence_manifest=check.get("evidence_manifest", False),
            observations=observations,
        )
    ]
    for item in check.get("slices") or []:
        rows.append(
            ResultView(
                name=f"{check['check_id']} / {item['name']}",
                is_slice=True,
                required=item.get("required", True),
                status=item["status"],
                result=item["result"],
                score=item.get("score"),
                chart=interval_chart(item, method, item.get("threshold", threshold)),
                coverage=item.get("coverage") or {},
                segments=coverage_bar(item.get("coverage") or {}, []),
                comparison=item.get("comparison"),
                method=method,
                threshold=item.get("threshold", threshold),
            )
        )
    return rows


@dataclass
class ReportView:
    """One report as the page shows it."""

    report_id: str
    digest: str
    body: dict[str, Any]
    envelope: dict[str, Any]
    subject_json: str
    reasons: list[str]
    rows: list[ResultView]


def report_view(
    report_id: str, digest: str, body_bytes: bytes, envelope: dict[str, Any]
) -> ReportView:
    """The page's view of a stored report and its served envelope."""
    body = orjson.loads(body_bytes)
    rows = [row for check in body.get("checks", []) for row in check_views(check)]
    return ReportView(
        report_id=report_id,
        digest=digest,
        body=body,
        envelope=envelope,
        subject_json=json.dumps(body.get("subject"), indent=2, ensure_ascii=False),
        reasons=[reason_text(r) for r in body.get("reasons", [])],
        rows=rows,
    )
