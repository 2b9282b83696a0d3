"""Geometry of a board's rank-interval drawing (docs/boards.md, section 4): one row per subject,
its rank interval a bar on a 1..K axis, its rank a point, the top group marked. Pure; the
template draws what this returns, with a sentence for screen readers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

WIDTH = 720
LABEL_WIDTH = 220
RIGHT_PAD = 24
ROW = 22
TOP = 30
BOTTOM = 26


@dataclass(frozen=True)
class RankRow:
    """One subject's row: its label, bar ends and point (pixels), and what it says."""

    label: str
    y: float
    x_from: float
    x_to: float
    x_rank: float
    top: bool
    title: str


@dataclass(frozen=True)
class RankChart:
    """The drawing: its size, rows, axis ticks, and the sentence a screen reader hears."""

    width: int
    height: int
    rows: list[RankRow]
    ticks: list[tuple[float, str]]
    axis_y: float
    description: str


def _x(rank: float, count: int) -> float:
    """Where rank `rank` (1..count) sits on the axis."""
    span = WIDTH - LABEL_WIDTH - RIGHT_PAD
    return LABEL_WIDTH + (0.5 if count == 1 else (rank - 1) / (count - 1)) * span


def short_label(subject: str, name: str | None) -> str:
    """A subject as a row names it: its name when it has one, else its digest's start (so
    labels stay within the label column and never run into the bars)."""
    text = name or subject
    return text if len(text) <= 28 else text[:27] + "…"


def rank_chart(body: dict[str, Any], names: dict[str, str | None]) -> RankChart:
    """The rank-interval chart of a board's body (`names`: subject digest -> name)."""
    placed = body["subjects"]
    count = len(placed)
    top = set(body["top_group"])
    rows = []
    for index, entry in enumerate(placed):
        lo, hi = entry["rank_interval"]
        rows.append(
            RankRow(
                short_label(entry["subject"], names.get(entry["subject"])),
                TOP + index * ROW + ROW / 2,
                _x(lo, count),
                _x(hi, count),
                _x(entry["rank"], count),
                entry["subject"] in top,
                f"{entry['subject']}: rank {entry['rank']}, rank interval {lo} to {hi}",
            )
        )
    step = max(1, math.ceil(count / 10))
    marks = sorted({1, count, *range(1, count + 1, step)})
    axis_y = TOP + count * ROW + 4
    return RankChart(
        WIDTH,
        int(axis_y + BOTTOM),
        rows,
        [(_x(m, count), str(m)) for m in marks],
        axis_y,
        tied_sentence(body),
    )


def tied_sentence(body: dict[str, Any]) -> str:
    """How many subjects are tied at the top, as one sentence."""
    count, tied = len(body["subjects"]), len(body["top_group"])
    alpha = body["alpha"]
    if count == 0:
        return "No subject has an executed example of this check."
    if tied == 1:
        return (
            f"The first subject is significantly better than each of the other {count - 1} "
            f"(Holm, family-wise alpha {alpha})."
        )
    every = "All" if tied == count else f"{tied} of the"
    return (
        f"{every} {count} subjects are tied at the top: none of them is significantly worse "
        f"than the first (Holm, family-wise alpha {alpha})."
    )
