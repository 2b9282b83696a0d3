"""A suite's history: its gate reports in issue order, each check's score and interval."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from app.domain.errors import NotFound
from app.domain.reports import ListedView, ReportFilters, subject_name
from app.identity.auth import Principal
from app.platform.db import ReadConnection
from app.repositories import reads

MAX_HISTORY = 1000


@dataclass(frozen=True, slots=True)
class CheckPoint:
    """One check's result in one report."""

    score: float | None
    lower: float | None
    upper: float | None
    result: str
    comparative: bool
    # A measure check's measure (latency_ms) and whether lower is better, for the pages.
    measure: str | None = None
    lower_is_better: bool = False

    def as_json(self) -> dict[str, Any]:
        """The API's form."""
        return {
            "score": self.score,
            "interval": None if self.lower is None else {"lower": self.lower, "upper": self.upper},
            "result": self.result,
            "comparative": self.comparative,
        }


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One gate report of the suite."""

    report_id: str
    issued_at: datetime
    subject_digest: str
    suite_version: str
    result: str
    status: str
    superseded_by: str | None
    checks: dict[str, CheckPoint] = field(default_factory=dict)
    subject_name: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The API's form."""
        return {
            "report_id": self.report_id,
            "issued_at": self.issued_at.isoformat().replace("+00:00", "Z"),
            "subject_digest": self.subject_digest,
            "subject_name": self.subject_name,
            "suite_version": self.suite_version,
            "result": self.result,
            "status": self.status,
            "superseded_by": self.superseded_by,
            "checks": {k: v.as_json() for k, v in self.checks.items()},
        }


def _point(view: ListedView, check: str | None) -> HistoryPoint:
    body = orjson.loads(view.body)
    checks = {}
    for item in body.get("checks", []):
        if check is not None and item["check_id"] != check:
            continue
        interval = item.get("interval") or {}
        checks[item["check_id"]] = CheckPoint(
            item.get("score"),
            interval.get("lower"),
            interval.get("upper"),
            item["result"],
            bool(item.get("comparison")),
            (item.get("measure") or {}).get("name"),
            (item.get("aggregation") or {}).get("better") == "lower",
        )
    return HistoryPoint(
        str(view.id),
        view.issued_at,
        view.subject_digest,
        str(body["suite_ref"]["version"]),
        view.result,
        view.status,
        None if view.superseded_by is None else str(view.superseded_by),
        checks,
        subject_name(body.get("subject")),
    )


async def suite_history(
    reader: ReadConnection, principal: Principal, suite: str, check: str | None, limit: int
) -> list[HistoryPoint]:
    """The suite's latest `limit` gate reports, oldest first (404 for an unknown suite)."""
    if not await reads.suite_exists(reader, principal.project_id, suite):
        raise NotFound(f"no suite {suite!r} in this project")
    views = await reads.report_list(
        reader, principal.project_id, ReportFilters(suite=suite, mode="gate"), None, limit
    )
    return [_point(view, check) for view in reversed(views)]


def history_json(suite: str, points: list[HistoryPoint]) -> bytes:
    """The history endpoint's answer."""
    return orjson.dumps({"suite": suite, "reports": [p.as_json() for p in points]})
