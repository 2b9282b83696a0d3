"""Geometry of the inline SVG drawings: an interval against its threshold (or a paired
difference against its margin), and coverage split by reason. Pure functions; the templates
draw what these return, with a text alternative."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WIDTH = 260
HEIGHT = 40
PAD = 12


@dataclass(frozen=True)
class IntervalChart:
    """Positions in pixels, and the sentence a screen reader hears instead."""

    axis_from: float
    axis_to: float
    lower: float | None
    upper: float | None
    point: float | None
    reference: float | None
    zero: float | None
    reference_label: str
    domain: tuple[float, float]
    description: str
    reference_value: float | None = None

    @property
    def reference_anchor(self) -> str:
        """The reference label's anchor: kept inside the drawing near either end."""
        return label_anchor(self.reference)


# About how far a label (`threshold 0.85`, `no change`) reaches from its anchor at 9 px.
LABEL_REACH = 40


def label_anchor(x: float | None, width: float = WIDTH) -> str:
    """`start` near the left edge, `end` near the right one, else `middle`: a label centred on
    a line close to an edge would be cut off."""
    if x is None:
        return "middle"
    if x < LABEL_REACH:
        return "start"
    if x > width - LABEL_REACH:
        return "end"
    return "middle"


def p_text(p: float | None) -> str:
    """A p-value as people read it: `p < 0.001`, never `p = 0`."""
    if p is None:
        return "p: none"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3g}"


@dataclass(frozen=True)
class ChangeChart:
    """A paired difference and its interval against no change (0)."""

    lower: float
    upper: float
    point: float
    zero: float
    domain: tuple[float, float]
    description: str


def change_chart(
    estimate: float | None, interval: dict[str, Any] | None, what: str
) -> ChangeChart | None:
    """The drawing of a diff's paired difference (after - before), or None without pairs."""
    if estimate is None or interval is None:
        return None
    lower, upper = float(interval["lower"]), float(interval["upper"])
    values = [lower, upper, estimate, 0.0]
    span = max(max(values) - min(values), 0.02)
    lo, hi = min(values) - span * 0.15, max(values) + span * 0.15
    level = interval.get("level")
    description = (
        f"{what} changed by {_fmt(estimate)}; "
        f"{level_text(level)} interval {_fmt(lower)} to {_fmt(upper)}; "
        + ("no change lies inside the interval" if lower <= 0 <= upper else "0 lies outside it")
    )
    return ChangeChart(
        _scale(lower, lo, hi),
        _scale(upper, lo, hi),
        _scale(estimate, lo, hi),
        _scale(0.0, lo, hi),
        (lo, hi),
        description,
    )


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def level_text(level: float | None) -> str:
    """An interval's level as given, in percent: 0.992 is "99.2 %", never a rounded "100 %"."""
    if not level:
        return ""
    return f"{level * 100:.6g} %"


def design_effect_text(value: float | None) -> str:
    """A design effect to 3 significant digits; "—" when it rests on a variance that rounds
    to 0 (a second-edition body may carry such a ratio, 6.61e-32)."""
    if value is None or not value > 1e-9:
        return "—"
    return f"{value:.3g}"


def _scale(value: float, lo: float, hi: float) -> float:
    return round(PAD + (value - lo) / (hi - lo) * (WIDTH - 2 * PAD), 2)


def _domain(method: str, comparison: Any, points: list[float | None]) -> tuple[float, float]:
    """The drawn range: around the points (and zero) for a comparison, [0, 1] for a rate,
    else at least [0, 1] and wide enough for every point."""
    values = [v for v in points if v is not None]
    if comparison:
        values.append(0.0)
        span = max(max(values) - min(values), 0.02)
        return min(values) - span * 0.15, max(values) + span * 0.15
    if method in ("pass_rate", "all_pass"):
        return 0.0, 1.0
    lo, hi = min([0.0, *values]), max([1.0, *values])
    return (lo, lo + 1.0) if hi - lo < 1e-9 else (lo, hi)


def _description(result: dict[str, Any], what: str, label: str, reference: float | None) -> str:
    """What the drawing shows, in words (the chart's accessible text)."""
    comparison, score = result.get("comparison"), result.get("score")
    interval = result.get("interval") or {}
    lower, upper = interval.get("lower"), interval.get("upper")
    parts = []
    if score is not None:
        parts.append(f"{what} {_fmt(score)}")
    if lower is not None and upper is not None:
        parts.append(f"{level_text(interval.get('level'))} interval {_fmt(lower)} to {_fmt(upper)}")
    if reference is not None:
        parts.append(f"{label} {_fmt(reference)}")
    if comparison:
        parts.append(
            f"p = {_fmt(comparison['p_value'])}, adjusted p = {_fmt(comparison['p_adjusted'])}"
        )
    return "; ".join(parts) or "no score"


def interval_chart(result: dict[str, Any], method: str, threshold: float | None) -> IntervalChart:
    """The drawing of a check or slice result: its interval and score against the threshold,
    or, when it carries a comparison, the paired difference against the margin."""
    comparison = result.get("comparison")
    interval = result.get("interval") or {}
    score = result.get("score")
    lower, upper = interval.get("lower"), interval.get("upper")
    reference = float(comparison["delta0"]) if comparison else threshold
    label = "margin" if comparison else "threshold"
    lo, hi = _domain(method, comparison, [lower, upper, score, reference])
    what = "paired difference" if comparison else "score"
    return IntervalChart(
        axis_from=PAD,
        axis_to=WIDTH - PAD,
        lower=None if lower is None else _scale(lower, lo, hi),
        upper=None if upper is None else _scale(upper, lo, hi),
        point=None if score is None else _scale(score, lo, hi),
        reference=None if reference is None else _scale(reference, lo, hi),
        zero=_scale(0.0, lo, hi) if comparison else None,
        reference_label=label,
        domain=(lo, hi),
        description=_description(result, what, label, reference),
        reference_value=reference,
    )


@dataclass(frozen=True)
class Segment:
    """One part of a coverage bar."""

    reason: str
    count: int
    x: float
    width: float


def coverage_bar(coverage: dict[str, int], observations: list[dict[str, Any]]) -> list[Segment]:
    """Executed examples, then the unexecuted ones by reason (the engine's observations)."""
    expected = max(int(coverage.get("expected", 0)), 1)
    counts = [("executed", int(coverage.get("executed", 0)))]
    counts += [
        (o["code"].removeprefix("unexecuted_"), int(o.get("count", 0)))
        for o in observations
        if o.get("code", "").startswith("unexecuted_")
    ]
    explained = sum(count for _, count in counts)
    if explained < expected and coverage.get("expected", 0):
        counts.append(("missing", expected - explained))
    segments, x = [], 0.0
    for reason, count in counts:
        if count <= 0:
            continue
        width = round(count / expected * WIDTH, 2)
        segments.append(Segment(reason, count, round(x, 2), width))
        x += width
    return segments
