"""A suite's history page at its largest (1,000 gate reports): the trends drawn as one path per
kind of mark, every report still linked from the table, the page under 1 MB; a short history
keeps a link and a title on each point."""

from __future__ import annotations

import random
import re
import uuid
from datetime import UTC, datetime, timedelta

from app.api.web import trends
from app.api.web.render import templates
from app.api.web.views import when
from app.services.history import CheckPoint, HistoryPoint
from tests.web.test_templates import ME

CHECKS = ("accuracy", "no_harm", "helpfulness")


def history(count: int, superseded_every: int = 7) -> list[HistoryPoint]:
    """`count` gate reports of three checks, oldest first, every few superseded."""
    rng = random.Random(count)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    points = []
    for i in range(count):
        checks = {}
        for check in CHECKS:
            score = rng.random()
            checks[check] = CheckPoint(
                score, score * 0.8, min(1.0, score * 1.2), rng.choice(["pass", "fail"]), False
            )
        superseded = i % superseded_every == 0
        points.append(
            HistoryPoint(
                str(uuid.UUID(int=rng.getrandbits(128))),
                start + timedelta(minutes=i),
                "sha256:" + rng.randbytes(32).hex(),
                "3",
                "pass",
                "superseded" if superseded else "current",
                str(uuid.UUID(int=i + 1)) if superseded else None,
                checks,
                f"candidate-model-{i % 10}",
            )
        )
    return points


def render(points: list[HistoryPoint]) -> str:
    """The history page as the route renders it."""
    drawn = [t for t in (trends.trend(c, points) for c in CHECKS) if t is not None]
    return templates.get_template("history.html").render(
        {
            "me": ME,
            "suite": "rag",
            "points": points,
            "check_ids": list(CHECKS),
            "trends": drawn,
            "shown": len(points),
            "issued": [when(p.issued_at) for p in points],
        }
    )


def test_a_history_of_1000_reports_is_drawn_in_paths_and_stays_under_a_megabyte() -> None:
    points = history(1000)
    page = render(points)
    assert len(page.encode()) < 1_000_000
    assert page.count('class="chart trend"') == 3
    assert "<circle" not in page
    superseded = sum(p.status == "superseded" for p in points)
    for chart in re.findall(r"<svg class=\"chart trend\".*?</svg>", page, re.S):
        dots = re.findall(r'<path class="dot dot-(\w+)" d="([^"]+)"', chart)
        # Every report's dot, and over each superseded one a ring.
        assert sum(d.count("h0") for kind, d in dots if kind != "superseded") == 1000
        assert sum(d.count("h0") for kind, d in dots if kind == "superseded") == superseded
        assert dots[-1][0] == "superseded"
        whiskers = re.findall(r'<path class="whisker whisker-\w+" d="([^"]+)"', chart)
        assert sum(w.count("V") for w in whiskers) == 1000
    # The table links every report and each to the one before; the form offers them all.
    for point in points:
        assert f'<a href="/reports/{point.report_id}">' in page
    assert page.count("with the previous</a>") == 999
    assert page.count("<option value=") == 1000
    assert (
        f'id="after" name="after" list="history-reports" size="42" value="{points[-1].report_id}"'
        in page
    )
    assert "links each report" in page


def test_a_dense_trend_puts_each_dot_where_the_sparse_one_puts_its_point() -> None:
    points = history(trends.DENSE_FROM)
    dense = trends.trend("accuracy", points)
    sparse = trends.trend("accuracy", points[: trends.DENSE_FROM - 1])
    assert dense is not None and dense.dense and sparse is not None and not sparse.dense
    coordinates = [
        (float(x), float(y))
        for _, d in dense.marks or []
        for x, y in re.findall(r"M([\d.]+),([\d.]+)h0", d)
    ]
    first = sparse.points[0]
    assert (first.x, first.y) in coordinates
    assert len(sparse.points) == trends.DENSE_FROM - 1 and not dense.points


def test_a_short_history_links_and_titles_each_point() -> None:
    points = history(20)
    page = render(points)
    assert page.count("<circle") == 3 * 20
    assert page.count("<title>") >= 3 * 20
    assert "links each report" not in page
    for point in points:
        assert page.count(f'<a href="/reports/{point.report_id}"><circle') == 3


def test_a_measure_check_is_drawn_in_its_units_and_says_lower_is_better() -> None:
    points = history(5)
    for i, point in enumerate(points):
        point.checks["latency"] = CheckPoint(
            1800.0 + 10 * i, 1700.0, 1990.0 + i, "pass", False, "latency_ms", True
        )
    drawn = trends.trend("latency", points)
    assert drawn is not None
    assert drawn.reading == "latency in ms, lower is better"
    assert [t.text for t in drawn.ticks[:3]] == ["1,700 ms", "1,850 ms", "1,990 ms"]
    assert "first 1,800 ms, last 1,840 ms" in drawn.description
    assert drawn.points[1].label.endswith(": 1,810 ms (pass)")
    scored = trends.trend("accuracy", points)
    assert scored is not None and scored.reading == ""


def test_the_page_title_is_the_suites_alone() -> None:
    page = render(history(3))
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    assert title is not None and title.group(1) == "History of rag · EvalBook"
    assert page.count('id="boards-h"') == 1
