"""What the comparison page shows, built from a computed diff of two reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.aggregation.diff import TRANSITIONS
from app.api.web.charts import ChangeChart, change_chart, p_text
from app.api.web.measure_views import MeasureView, measure_views
from app.domain.vocabulary import PASS_FAIL_METHODS

if TYPE_CHECKING:
    from app.services.diff_checks import CheckDiff
    from app.services.diffs import ReportDiff
    from app.services.example_pages import SideBySide

SHOWN = 20
REGRESSIONS = ("pass-fail", "pass-error", "pass-missing")
FIXES = ("fail-pass", "error-pass", "missing-pass")


@dataclass(frozen=True)
class Moved:
    """An example that regressed or was fixed."""

    example_id: str
    before: str
    after: str
    change: str = ""


@dataclass
class GroupRow:
    """A check (or one of its slices) before and after."""

    name: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    score_change: float | None
    own: dict[str, float | None]
    transitions: list[tuple[str, int]]
    changed: int
    mcnemar: dict[str, Any]
    p_text: str
    difference: dict[str, Any]
    chart: ChangeChart | None


@dataclass
class CheckView:
    """A matched check on the comparison page."""

    check_id: str
    method: str
    row: GroupRow
    slices: list[GroupRow]
    regressions: list[Moved] = field(default_factory=list)
    regression_count: int = 0
    fixes: list[Moved] = field(default_factory=list)
    fix_count: int = 0
    # With a transition filter: that transition's examples, and the cursor of the next page.
    chosen: list[str] = field(default_factory=list)
    chosen_count: int = 0
    chosen_next: str | None = None


def group_row(name: str, answer: dict[str, Any], measure: str) -> GroupRow:
    """A check's or slice's numbers, with its change drawn."""
    difference = answer["difference"]
    return GroupRow(
        name=name,
        before=answer["before"],
        after=answer["after"],
        score_change=answer["score_change"],
        own=answer["own_score"],
        transitions=[(t, n) for t, n in answer["transitions"].items() if n],
        changed=answer["changed_examples"],
        mcnemar=answer["mcnemar"],
        p_text=p_text(answer["mcnemar"]["p_value"]),
        difference=difference,
        chart=change_chart(difference["estimate"], difference["interval"], measure),
    )


def _outcome_moves(
    check: CheckDiff, names: tuple[str, ...], slice_name: str | None
) -> tuple[list[Moved], int]:
    moved: list[Moved] = []
    total = 0
    for name in names:
        page = check.page(name, None, SHOWN, slice_name)
        total += page["count"]
        before, after = name.split("-")
        moved += [Moved(e, before, after) for e in page["example_ids"]]
    return sorted(moved, key=lambda m: m.example_id.encode())[:SHOWN], total


def _value_moves(check: CheckDiff, slice_name: str | None, gains: bool) -> list[Moved]:
    return [
        Moved(e, f"{b:.4g}", f"{a:.4g}", f"{change:+.4g}")
        for e, b, a, change in check.moves(slice_name, gains, SHOWN)
    ]


def check_view(
    check: CheckDiff,
    slice_name: str | None,
    transition: str | None,
    after_example: str | None,
    page_size: int,
) -> CheckView | None:
    """A check's view (None when the slice filter names a slice it does not have)."""
    answer = check.answer
    measure = "pass rate" if answer["method"] in PASS_FAIL_METHODS else "score"
    slices = {s["name"]: s for s in answer["slices"]}
    if slice_name is not None and slice_name not in slices:
        return None
    main = answer if slice_name is None else slices[slice_name]
    view = CheckView(
        check.check_id,
        answer["method"],
        group_row(check.check_id if slice_name is None else slice_name, main, measure),
        [] if slice_name else [group_row(s["name"], s, measure) for s in answer["slices"]],
    )
    if answer["method"] in PASS_FAIL_METHODS:
        view.regressions, view.regression_count = _outcome_moves(check, REGRESSIONS, slice_name)
        view.fixes, view.fix_count = _outcome_moves(check, FIXES, slice_name)
    else:
        view.regressions = _value_moves(check, slice_name, gains=False)
        view.fixes = _value_moves(check, slice_name, gains=True)
        view.regression_count, view.fix_count = len(view.regressions), len(view.fixes)
    if transition is not None:
        page = check.page(transition, after_example, page_size, slice_name)
        view.chosen, view.chosen_count = page["example_ids"], page["count"]
        view.chosen_next = page["next_cursor"]
    return view


@dataclass
class CompareView:
    """The comparison page."""

    diff: ReportDiff
    checks: list[CheckView]
    slice_names: list[str]
    transitions: tuple[str, ...]
    filters: dict[str, str | None]
    # Per measure check in both reports, its examples whose measure changed most.
    measures: list[MeasureView] = field(default_factory=list)
    # Each listed example's repeats before and after, by (check id, example id).
    outputs: dict[tuple[str, str], SideBySide] = field(default_factory=dict)


def listed_examples(view: CompareView) -> dict[str, list[str]]:
    """The example ids the page lists, by check: regressions, fixes and a transition's page."""
    return {
        c.check_id: [m.example_id for m in c.regressions + c.fixes] + list(c.chosen)
        for c in view.checks
    }


def compare_view(
    diff: ReportDiff,
    slice_name: str | None,
    transition: str | None,
    after_example: str | None,
    page_size: int = 100,
) -> CompareView:
    """Every matched check, under the page's filters."""
    names = sorted({s["name"] for c in diff.checks.values() for s in c.answer["slices"]})
    views = [
        check_view(check, slice_name, transition, after_example, page_size)
        for check in diff.checks.values()
    ]
    changed = tuple(t for t in TRANSITIONS if t.split("-")[0] != t.split("-")[1])
    return CompareView(
        diff,
        [v for v in views if v is not None],
        names,
        changed,
        {"slice": slice_name, "transition": transition},
        measure_views(diff.measures),
    )
