"""Geometry of a suite's trend drawings: one check's score and interval across its gate
reports in issue order. Pure functions; the template draws what these return, with a text
alternative (a sentence, and the table beside it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.api.web.views import when
from app.domain.measure_text import amount, split_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.services.history import HistoryPoint

WIDTH, HEIGHT = 640, 190
LEFT, RIGHT, TOP, BOTTOM = 52, 20, 14, 34
# Tick labels are 10 px high: rows of them at least this far apart never touch.
MIN_TICK_GAP = 16
# From this many points on (under 4 px apart, closer than a point's radius) a chart draws its
# whiskers and points as one path per kind, without a link and title per point: the table
# beside it links every report, and the page stays small (1,000 reports: 3 paths, not 2,000
# elements a chart).
DENSE_FROM = 150


@dataclass(frozen=True)
class TrendPoint:
    """One report on the trend."""

    x: float
    y: float
    lower: float | None
    upper: float | None
    result: str
    superseded: bool
    report_id: str
    label: str


@dataclass(frozen=True)
class Tick:
    """A label on an axis."""

    x: float
    y: float
    text: str
    anchor: str


@dataclass(frozen=True)
class Trend:
    """One check's drawing."""

    check_id: str
    points: list[TrendPoint]
    line: str
    ticks: list[Tick]
    grid: list[float]
    description: str
    # What the values are when not scores: "latency in ms, lower is better".
    reading: str = ""
    width: int = WIDTH
    height: int = HEIGHT
    # A dense chart's (class, path data) of its whiskers and of its points, by kind.
    whiskers: list[tuple[str, str]] | None = None
    marks: list[tuple[str, str]] | None = None

    @property
    def dense(self) -> bool:
        """Whether the points are drawn as paths (see DENSE_FROM)."""
        return self.marks is not None


def _dense_paths(points: list[TrendPoint]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Whiskers and points as one path per class. A point is a zero-length segment, which the
    stylesheet draws as a dot with a round cap (a superseded one as a ring: the same dots
    again, smaller and white, on top)."""
    whiskers: dict[str, list[str]] = {}
    marks: dict[str, list[str]] = {}
    for p in points:
        if p.lower is not None and p.upper is not None:
            whiskers.setdefault(f"whisker whisker-{p.result}", []).append(
                f"M{p.x:g},{p.upper:g}V{p.lower:g}"
            )
        dot = f"M{p.x:g},{p.y:g}h0"
        marks.setdefault(f"dot dot-{p.result}", []).append(dot)
        if p.superseded:
            marks.setdefault("dot dot-superseded", []).append(dot)
    return (
        [(kind, "".join(parts)) for kind, parts in whiskers.items()],
        # The rings last, over the dots they hollow out.
        sorted(
            ((kind, "".join(parts)) for kind, parts in marks.items()),
            key=lambda m: m[0] == "dot dot-superseded",
        ),
    )


def _domain(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if lo >= 0.0 and hi <= 1.0:
        lo, hi = min(lo, 0.0), max(hi, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def trend(check_id: str, history: list[HistoryPoint]) -> Trend | None:
    """The drawing of one check across the reports that scored it (None if none did)."""
    scored = [
        (p, p.checks[check_id])
        for p in history
        if check_id in p.checks and p.checks[check_id].score is not None
    ]
    if not scored:
        return None
    values = [v for _, c in scored for v in (c.score, c.lower, c.upper) if v is not None]
    lo, hi = _domain(values)
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def y_of(value: float) -> float:
        return round(TOP + (hi - value) / (hi - lo) * inner_h, 2)

    step = inner_w / max(len(scored) - 1, 1)
    dense = len(scored) >= DENSE_FROM
    points = [
        _point(
            round(LEFT + (i * step if len(scored) > 1 else inner_w / 2), 2),
            point,
            check,
            y_of,
            dense,
        )
        for i, (point, check) in enumerate(scored)
    ]
    grid = [lo, (lo + hi) / 2, hi]
    latest = scored[-1][1]
    unit = _unit(latest)
    ticks = [Tick(LEFT - 6, y_of(v) + 3.5, _tick(v, unit), "end") for v in grid]
    first, last = scored[0][0], scored[-1][0]
    base = HEIGHT - BOTTOM + 18
    ticks.append(Tick(LEFT, base, when(first.issued_at)[:10], "start"))
    if len(scored) > 1:
        ticks.append(Tick(WIDTH - RIGHT, base, when(last.issued_at)[:10], "end"))
    reading = _reading(latest.measure, unit, latest.lower_is_better)
    description = _description(check_id, reading, unit, scored)
    return _drawn(check_id, points, ticks, [y_of(v) for v in grid], description, dense, reading)


def _description(check_id: str, reading: str, unit: str, scored: list[Any]) -> str:
    """The chart's text alternative: its span and its first, last, lowest and highest value."""
    scores = [c.score for _, c in scored if c.score is not None]
    first, last = scored[0][0], scored[-1][0]
    return (
        f"{check_id}{f' ({reading})' if reading else ''} over {len(scored)} gate reports from "
        f"{when(first.issued_at)} to {when(last.issued_at)}: first {_value(scores[0], unit)}, "
        f"last {_value(scores[-1], unit)}, lowest {_value(min(scores), unit)}, highest "
        f"{_value(max(scores), unit)}"
    )


def _reading(measure: str | None, unit: str, lower_is_better: bool) -> str:
    """What a chart's values are, when they are not scores where higher is better."""
    parts = []
    if measure:
        what = split_name(measure)[0]
        parts.append(f"{what} in {unit}" if unit else what)
    if lower_is_better:
        parts.append("lower is better")
    return ", ".join(parts)


def _tick(value: float, unit: str) -> str:
    """An axis label: three significant digits, or a measure's amount in its unit."""
    return amount(float(f"{value:.3g}"), unit) if unit else f"{value:.3g}"


def _unit(check: Any) -> str:
    """A measure check's unit ("" for scores)."""
    return split_name(check.measure)[1] if check.measure else ""


def _value(value: float, unit: str) -> str:
    """A value in the description: four significant digits, or an amount in its unit."""
    return amount(value, unit) if unit else f"{value:.4g}"


def _point(
    x: float,
    point: HistoryPoint,
    check: Any,
    y_of: Callable[[float], float],
    dense: bool,
) -> TrendPoint:
    """One report's mark: its score, whiskers, result and (unless dense) its title."""
    assert check.score is not None
    superseded = point.status == "superseded"
    return TrendPoint(
        x,
        y_of(check.score),
        None if check.lower is None else y_of(check.lower),
        None if check.upper is None else y_of(check.upper),
        check.result,
        superseded,
        point.report_id,
        # A dense chart shows no per-point title: its label is not written.
        ""
        if dense
        else f"{when(point.issued_at)}: {_value(check.score, _unit(check))} ({check.result}"
        + (", superseded" if superseded else "")
        + ")",
    )


def _drawn(
    check_id: str,
    points: list[TrendPoint],
    ticks: list[Tick],
    grid: list[float],
    description: str,
    dense: bool,
    reading: str = "",
) -> Trend:
    """The trend, its points as elements or (dense) as paths."""
    line = " ".join(f"{p.x},{p.y}" for p in points)
    if not dense:
        return Trend(check_id, points, line, ticks, grid, description, reading)
    whiskers, marks = _dense_paths(points)
    return Trend(
        check_id, [], line, ticks, grid, description, reading, whiskers=whiskers, marks=marks
    )
