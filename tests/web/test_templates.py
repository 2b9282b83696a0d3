"""The report page's template in each state a report can be in, and the drawings' geometry."""

from __future__ import annotations

import copy
import gzip
import html as html_lib
import uuid
from typing import Any

import orjson
import pytest

from app.api.web.charts import WIDTH, coverage_bar, interval_chart
from app.api.web.render import templates
from app.api.web.session import WebPrincipal
from app.api.web.views import report_view
from app.identity.auth import Principal
from tests.bundle_helpers import REPO

RICH = gzip.decompress((REPO / "tests/bundles/rich_pass/bundle.jsonl.gz").read_bytes()).splitlines()
BODY: dict[str, Any] = orjson.loads(RICH[1])["body"]
ENVELOPE: dict[str, Any] = orjson.loads(RICH[1])["envelope"]
ME = WebPrincipal(
    Principal(
        token_id=uuid.uuid4(),
        token_name="reviewer",
        kind="user",
        permissions=frozenset({"report.read", "report.export"}),
        assurance_cap="reported",
        project_id=uuid.uuid4(),
        project_slug="web",
        organization_id=uuid.uuid4(),
        organization_slug="acme",
    ),
    "csrf-token",
)
SUCCESSOR = "7d1d7a55-5a7c-4a8b-9a53-0c4c7a6b2f10"


def failing(body: dict[str, Any], result: str) -> None:
    body["result"] = result
    body["checks"][1]["status"] = body["checks"][1]["result"] = result
    body["reasons"] = [
        {"code": f"check_{result}", "check_id": "no_harm", "status": result, "step": 2}
    ]


def incomplete(body: dict[str, Any]) -> None:
    body["result"] = "inconclusive"
    body["evidence_complete"] = False
    body["coverage"] = {"expected": 24, "executed": 21, "missing": 3}
    check = body["checks"][1]
    check["status"] = check["result"] = "inconclusive"
    check["coverage"] = {"expected": 12, "executed": 9, "missing": 3}
    check["observations"] = [
        {"code": "unexecuted_error", "count": 1},
        {"code": "unexecuted_pending", "count": 2},
    ]
    body["reasons"] = [
        {"code": "check_inconclusive", "check_id": "no_harm", "status": "inconclusive", "step": 5},
        {"code": "evidence_incomplete", "check_id": "no_harm", "missing": 3, "undigested": 0},
    ]


def baseline_run(body: dict[str, Any]) -> None:
    """A comparative suite's baseline: an experiment with no baseline of its own."""
    body["mode"] = "experiment"
    for check in body["checks"]:
        if check.get("comparison"):
            check["comparison"]["baseline_evaluation_id"] = None


def superseded(envelope: dict[str, Any]) -> None:
    envelope.update(
        status="superseded",
        superseded_by=SUCCESSOR,
        superseded_at="2026-11-30T10:00:00.000000Z",
        superseded_reason="re_evaluation",
    )


STATES = {
    "pass": (lambda b: None, lambda e: None, ["Pass</span>", "Every required check passed"]),
    "fail": (
        lambda b: failing(b, "fail"),
        lambda e: None,
        ["Fail</span>", "The required check &#34;no_harm&#34; failed"],
    ),
    "error": (
        lambda b: failing(b, "error"),
        lambda e: None,
        ["Error</span>", "The required check &#34;no_harm&#34; ended in an error"],
    ),
    "inconclusive": (
        incomplete,
        lambda e: None,
        [
            "Inconclusive</span>",
            "The evidence for the check &#34;no_harm&#34; is incomplete: 3 expected example(s) were not executed",
            "2 pending",
            "1 error",
        ],
    ),
    "evidence_incomplete": (
        incomplete,
        lambda e: None,
        ["evidence incomplete", "coverage 21/24", "1 error"],
    ),
    "superseded": (
        lambda b: None,
        superseded,
        [
            "This report is superseded (re evaluation",
            f'href="/reports/{SUCCESSOR}"',
            "It no longer gates",
        ],
    ),
    "expired": (
        lambda b: None,
        lambda e: e.update(expired=True),
        ["This report expired at", "(expired)"],
    ),
    "comparative": (
        lambda b: None,
        lambda e: None,
        [
            "paired difference against the margin",
            "adjusted p = ",
            "12 pairs",
            "holm correction over accuracy, accuracy/german",
        ],
    ),
    "baseline run": (
        baseline_run,
        lambda e: None,
        ["a <strong>baseline run</strong>", "gates do not read it", "<code>--baseline "],
    ),
    "slices": (lambda b: None, lambda e: None, ['<tr class="slice">', "accuracy / german"]),
}


def render(body: dict[str, Any], envelope: dict[str, Any], **extra: Any) -> str:
    view = report_view(body["report_id"], "sha256:" + "0" * 64, orjson.dumps(body), envelope)
    context = {"me": ME, "r": view, "supersedes": [], "bundles": [], "can_export": True, **extra}
    return templates.get_template("report.html").render(context)


@pytest.mark.parametrize("state", sorted(STATES))
def test_the_report_page_in_each_state(state: str) -> None:
    change_body, change_envelope, expected = STATES[state]
    body, envelope = copy.deepcopy(BODY), copy.deepcopy(ENVELOPE)
    change_body(body)
    change_envelope(envelope)
    html = render(body, envelope)
    for text in expected:
        assert text in html, (state, text)
    # Never colour alone: every badge carries its word; every drawing a text alternative.
    assert html.count("<svg") == html.count('<title id="') == html.count('role="img"') > 0
    assert html.count("<desc") == html.count('class="chart"')
    assert '<th scope="col">Check</th>' in html and '<th scope="row">' in html
    assert '"repo": "acme/web"' in html_lib.unescape(html)  # the subject exactly as sent


def test_export_controls_follow_the_permission() -> None:
    assert "Export a bundle" in render(copy.deepcopy(BODY), copy.deepcopy(ENVELOPE))
    assert "Export a bundle" not in render(
        copy.deepcopy(BODY), copy.deepcopy(ENVELOPE), can_export=False
    )


def test_interval_chart_places_interval_point_and_threshold() -> None:
    result = {"score": 0.5, "interval": {"lower": 0.25, "upper": 0.75, "level": 0.95}}
    chart = interval_chart(result, "pass_rate", 0.6)
    assert chart.domain == (0.0, 1.0)
    assert chart.lower is not None and chart.upper is not None and chart.point is not None
    assert chart.lower < chart.point < chart.upper
    assert chart.point == pytest.approx((chart.axis_from + chart.axis_to) / 2)
    assert chart.reference is not None and chart.point < chart.reference < chart.upper
    assert chart.description == "score 0.5; 95 % interval 0.25 to 0.75; threshold 0.6"


def test_comparison_chart_shows_the_margin_and_zero() -> None:
    result = {
        "score": 0.01,
        "interval": {"lower": -0.02, "upper": 0.04, "level": 0.95},
        "comparison": {"delta0": -0.05, "p_value": 0.001, "p_adjusted": 0.002},
    }
    chart = interval_chart(result, "pass_rate", None)
    assert chart.reference is not None and chart.zero is not None and chart.lower is not None
    assert chart.reference < chart.lower < chart.zero
    assert "margin -0.05" in chart.description and "adjusted p = 0.002" in chart.description


def test_coverage_bar_splits_unexecuted_examples_by_reason() -> None:
    segments = coverage_bar(
        {"expected": 10, "executed": 6, "missing": 4},
        [{"code": "unexecuted_timeout", "count": 3}, {"code": "stale_cases", "count": 9}],
    )
    assert [(s.reason, s.count) for s in segments] == [
        ("executed", 6),
        ("timeout", 3),
        ("missing", 1),
    ]
    assert sum(s.width for s in segments) == pytest.approx(WIDTH)


def test_levels_and_design_effects_are_shown_as_they_are() -> None:
    """Statistics, third edition: a level of 0.9984 is not "100 %"; a design effect that rests
    on a variance rounding to 0 is "—", never "6.61e-32"."""
    from app.api.web.charts import design_effect_text, level_text

    assert [level_text(v) for v in (0.95, 0.992, 0.9984, 0.96)] == [
        "95 %",
        "99.2 %",
        "99.84 %",
        "96 %",
    ]
    assert design_effect_text(6.61e-32) == "—" and design_effect_text(0.0) == "—"
    assert design_effect_text(1.23456) == "1.23" and design_effect_text(12.345) == "12.3"


@pytest.mark.parametrize(
    ("clusters", "effect", "warned"), [(8, 2.5, True), (8, 1.5, False), (25, 3.0, False)]
)
def test_few_clusters_with_a_large_design_effect_are_warned_of(
    clusters: int, effect: float, warned: bool
) -> None:
    body = copy.deepcopy(BODY)
    check = body["checks"][0]
    check["observations"] = [
        o for o in check["observations"] if o["code"] not in ("clusters", "design_effect")
    ] + [
        {"code": "clusters", "count": clusters},
        {"code": "design_effect", "detail": effect},
    ]
    page = render(body, ENVELOPE)
    assert f"{clusters} clusters" in page
    assert ("coverage can fall short of its level" in page) is warned
