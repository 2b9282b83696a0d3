"""What the templates show, built from stored report bodies and envelopes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from app.api.web.charts import IntervalChart, Segment, coverage_bar, interval_chart
from app.api.web.judged_views import JudgedView, judged_view
from app.domain.measure_text import measure_sentence
from app.domain.reasons import reason_sentence

RESULT_WORDS = {
    "pass": "Pass",
    "fail": "Fail",
    "error": "Error",
    "inconclusive": "Inconclusive",
    "missing": "Missing",
    "stale": "Stale",
    "flaky": "Flaky",
}
RESULT_ICONS = {"pass": "✓", "fail": "✗", "error": "!", "inconclusive": "?", "flaky": "~"}


def when(moment: str | datetime | None) -> str:
    """A time as people read it: UTC, to the second."""
    if moment is None:
        return ""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def reason_text(reason: dict[str, Any], body: dict[str, Any] | None = None) -> str:
    """One sentence per reason of the body (app.domain.reasons)."""
    return reason_sentence(reason, body)


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
    # {"count", "root"}: the check's cases tree (absent from reports issued before it)
    cases: dict[str, Any] | None = None
    assurance: str = ""
    method: str = ""
    threshold: float | None = None
    evidence_manifest: bool = False
    observations: list[dict[str, Any]] = field(default_factory=list)
    statistics: Statistics | None = None
    # A measure check read in its units ("latency p95 1,840 ms <= 2,000 ms ..."), and whether
    # a lower score is the better one.
    measure_text: str | None = None
    lower_is_better: bool = False
    # The check whose cases a row's cases are: its own, or the one a measure check measures.
    cases_check: str = ""
    # A judged check's correction by human labels (docs/verdicts.md, section 13).
    judged: JudgedView | None = None


@dataclass
class Statistics:
    """What the statistics observations say of a check or slice (docs/verdicts.md, 7 to 9)."""

    clusters: int | None = None
    design_effect: float | None = None
    mde: float | None = None
    distance: float | None = None
    n: int | None = None
    n_needed: int | None = None
    underpowered: bool = False
    flaky: list[str] = field(default_factory=list)
    flaky_count: int = 0
    pass_all: float | None = None
    pass_any: float | None = None
    # Second edition: (G, min_clusters) when too few clusters left the group inconclusive.
    too_few_clusters: tuple[int, int] | None = None

    @property
    def power_chart(self) -> dict[str, float] | None:
        """Bar lengths (of 120 px) of the MDE and of the distance to the bar."""
        if self.mde is None or self.distance is None:
            return None
        longest = max(self.mde, self.distance) or 1.0
        return {"mde": 120 * self.mde / longest, "distance": 120 * self.distance / longest}


def statistics_of(
    result: dict[str, Any], observations: list[dict[str, Any]], slice_name: str | None, bar: float
) -> Statistics | None:
    """The statistics observations of one check (slice_name None) or slice."""
    mine = {o["code"]: o for o in observations if o.get("slice") == slice_name}
    if not mine:
        return None
    found = Statistics()
    if "clusters" in mine:
        found.clusters = mine["clusters"]["count"]
    if "design_effect" in mine:
        found.design_effect = mine["design_effect"]["detail"]
    score = result.get("score")
    if "mde" in mine and score is not None:
        found.mde = mine["mde"]["detail"]["mde"]
        found.distance = abs(score - bar)
    if "underpowered" in mine:
        found.underpowered = True
        found.n = mine["underpowered"]["detail"]["n"]
        found.n_needed = mine["underpowered"]["detail"]["n_needed"]
    if "flaky_examples" in mine:
        found.flaky = list(mine["flaky_examples"].get("detail") or [])
        found.flaky_count = mine["flaky_examples"]["count"]
    if "too_few_clusters" in mine:
        detail = mine["too_few_clusters"]["detail"]
        found.too_few_clusters = (detail["clusters"], detail["min_clusters"])
    if "pass_all_repeats" in mine:
        found.pass_all = mine["pass_all_repeats"]["detail"]
        found.pass_any = mine["pass_any_repeat"]["detail"]
    return found


def _bar(result: dict[str, Any], threshold: float | None) -> float:
    comparison = result.get("comparison")
    if comparison:
        return float(comparison["delta0"])
    return float(threshold or 0.0)


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
            cases=check.get("cases"),
            assurance=check.get("assurance", ""),
            method=method,
            threshold=threshold,
            evidence_manifest=check.get("evidence_manifest", False),
            observations=observations,
            statistics=statistics_of(check, observations, None, _bar(check, threshold)),
            measure_text=measure_sentence(check),
            lower_is_better=aggregation.get("better") == "lower",
            cases_check=(check.get("measure") or {}).get("of") or check["check_id"],
            judged=judged_view(check),
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
                statistics=statistics_of(
                    item, observations, item["name"], _bar(item, item.get("threshold", threshold))
                ),
            )
        )
    return rows


@dataclass
class ReportPanel:
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
) -> ReportPanel:
    """The page's view of a stored report and its served envelope."""
    body = orjson.loads(body_bytes)
    rows = [row for check in body.get("checks", []) for row in check_views(check)]
    return ReportPanel(
        report_id=report_id,
        digest=digest,
        body=body,
        envelope=envelope,
        subject_json=json.dumps(body.get("subject"), indent=2, ensure_ascii=False),
        reasons=[reason_text(r, body) for r in body.get("reasons", [])],
        rows=rows,
    )
