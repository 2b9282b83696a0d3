"""The comparison page's measures: per measure check in both reports, the examples whose
measure changed most, in the measure's units, a change for the worse marked as such."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.domain.measure_text import amount, split_name


@dataclass(frozen=True)
class MeasureRow:
    """One example's measure (its mean over the repeats) before and after."""

    example_id: str
    before: str
    after: str
    change: str
    worse: bool


@dataclass(frozen=True)
class MeasureView:
    """One measure check's largest changes."""

    check_id: str
    of: str
    reading: str
    rows: list[MeasureRow]


def measure_views(measures: list[dict[str, Any]]) -> list[MeasureView]:
    """The diff's measure changes as the page shows them."""
    return [_view(found) for found in measures]


def _view(found: dict[str, Any]) -> MeasureView:
    name = str(found["measure"]["name"])
    what, unit = split_name(name)
    lower = found.get("better") == "lower"
    reading = f"{what}{f' in {unit}' if unit else ''}, {'lower' if lower else 'higher'} is better"
    rows = [
        MeasureRow(
            str(change["example_id"]),
            amount(change["before"], unit),
            amount(change["after"], unit),
            ("+" if change["change"] > 0 else "−" if change["change"] < 0 else "±")
            + amount(abs(change["change"]), unit),
            change["change"] > 0 if lower else change["change"] < 0,
        )
        for change in found["largest_changes"]
    ]
    return MeasureView(str(found["check_id"]), str(found["measure"]["of"]), reading, rows)
