"""One matched check of two reports compared, from both sides' case arrays (no I/O): each
example's transition, the paired difference, McNemar's test, slices, the largest moves, and
pages of the examples behind a transition."""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.aggregation import diff as calc
from app.aggregation.inputs import DatasetIndex
from app.aggregation.rounding import r12
from app.domain.suites import CompiledCheck
from app.domain.vocabulary import PASS_FAIL_METHODS
from app.services.kit.cursors import example_cursor

FIRST_PAGE = 20


@dataclass(frozen=True)
class Side:
    """One of the two reports: its body and what reading its cases needs."""

    report_id: uuid.UUID
    digest: str
    body: dict[str, Any]
    evaluation_id: uuid.UUID
    checks: dict[str, CompiledCheck]
    status: str
    superseded_by: uuid.UUID | None
    # The suite version's check definitions (slices with their tags), by check id.
    definitions: dict[str, dict[str, Any]]

    def check(self, check_id: str) -> dict[str, Any]:
        """The body's check."""
        return next(c for c in self.body["checks"] if c["check_id"] == check_id)

    def reference(self) -> dict[str, Any]:
        """Who this report is, in a diff's answer."""
        return {
            "report_id": str(self.report_id),
            "digest": self.digest,
            "evaluation_id": str(self.evaluation_id),
            "suite_ref": self.body["suite_ref"],
            "subject_digest": self.body["subject"]["digest"],
            "issued_at": self.body["issued_at"],
            "result": self.body["result"],
            "status": self.status,
        }


@dataclass
class CheckDiff:
    """One matched check: the union of its example ids, each one's transition, and the
    answer's JSON for the check."""

    check_id: str
    ids: Sequence[str]
    codes: np.ndarray
    answer: dict[str, Any]
    # Each slice's examples (a mask over `ids`), by slice name.
    slices: dict[str, np.ndarray] = field(default_factory=dict)
    # Each example's value before and after (NaN unless it passed or failed).
    values: tuple[np.ndarray, np.ndarray] | None = None

    def moves(self, slice_name: str | None, gains: bool, top: int = calc.TOP) -> list[Any]:
        """The largest drops (or gains) of example values, in a slice or the whole check."""
        assert self.values is not None
        before, after = self.values
        both = ~np.isnan(before) & ~np.isnan(after)
        if slice_name is not None:
            both &= self.slices[slice_name]
        paired = np.flatnonzero(both)
        changes = after[paired] - before[paired]
        found = calc.Difference(int(paired.size), None, None, paired, changes)
        return [
            (str(self.ids[i]), float(before[i]), float(after[i]), change)
            for i, change in calc.largest_moves(found, gains, top)
        ]

    def page(
        self,
        transition: str,
        after_example: str | None,
        limit: int,
        slice_name: str | None = None,
    ) -> dict[str, Any]:
        """Example ids of one transition (in a slice, or the whole check) in byte order, after
        the example id a cursor named."""
        code = calc.TRANSITIONS.index(transition)
        chosen_examples = self.codes == code
        if slice_name is not None:
            chosen_examples &= self.slices[slice_name]
        positions = np.flatnonzero(chosen_examples)
        start = 0
        if after_example is not None:
            start = int(np.searchsorted(positions, bisect.bisect_right(self.ids, after_example)))
        chosen = positions[start : start + limit]
        ids = [str(self.ids[i]) for i in chosen]
        following = None
        if start + limit < positions.size and ids:
            following = example_cursor(ids[-1])
        return {
            "check_id": self.check_id,
            "transition": transition,
            "count": int(positions.size),
            "example_ids": ids,
            "next_cursor": following,
        }


def example_facts_of(
    rows: np.ndarray, dataset: DatasetIndex, check: CompiledCheck, method: str
) -> calc.ExampleFacts:
    """A report's check over its dataset, from the check's narrow case columns."""
    return calc.example_facts(
        rows["position"].astype(np.int32),
        rows["repeat"].astype(np.int32),
        rows["status"].astype(np.int8),
        rows["score"].astype(np.float64),
        dataset.size,
        check.repeats,
        method,
    )


def _aligned(
    before: calc.ExampleFacts,
    after: calc.ExampleFacts,
    before_set: DatasetIndex,
    after_set: DatasetIndex,
) -> tuple[Sequence[str], calc.ExampleFacts, calc.ExampleFacts, DatasetIndex | None]:
    """Both sides over one example order: the dataset's when both used the same examples,
    else the union of their ids."""
    if before_set is after_set or before_set.ids == after_set.ids:
        return after_set.ids, before, after, after_set
    union, in_before, in_after = calc.union_of(np.array(before_set.ids), np.array(after_set.ids))
    return (
        union.tolist(),
        calc.on_union(before, in_before),
        calc.on_union(after, in_after),
        None,
    )


def _tag_mask(
    tag: str, ids: Sequence[str], shared: DatasetIndex | None, sets: tuple[DatasetIndex, ...]
) -> np.ndarray:
    if shared is not None:
        return shared.tag_mask(tag)
    tagged = {i for s in sets for i, tags in zip(s.ids, s.tags, strict=True) if tag in tags}
    return np.fromiter((i in tagged for i in ids), dtype=np.bool_, count=len(ids))


def _result(result: dict[str, Any] | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {k: result.get(k) for k in ("score", "interval", "status", "result")}


def _own_score(facts: calc.ExampleFacts, mask: np.ndarray) -> float | None:
    values = facts.value[mask & (facts.outcome <= calc.FAILED)]
    return r12(float(np.mean(values))) if values.size else None


def _group_answer(
    name: str | None,
    group: calc.GroupDiff,
    before_result: dict[str, Any] | None,
    after_result: dict[str, Any] | None,
    own: tuple[float | None, float | None],
) -> dict[str, Any]:
    difference = group.difference
    before_score = (before_result or {}).get("score")
    after_score = (after_result or {}).get("score")
    answer: dict[str, Any] = {
        "before": _result(before_result),
        "after": _result(after_result),
        "score_change": None
        if before_score is None or after_score is None
        else r12(after_score - before_score),
        "own_score": {"before": own[0], "after": own[1]},
        "transitions": group.transitions,
        "changed_examples": sum(
            n for t, n in group.transitions.items() if t.split("-")[0] != t.split("-")[1]
        ),
        "mcnemar": group.mcnemar,
        "difference": {
            "pairs": difference.pairs,
            "estimate": difference.estimate,
            "interval": difference.interval,
        },
    }
    if name is not None:
        answer = {"name": name, **answer}
    return answer


def _moves(
    ids: Sequence[str], before: calc.ExampleFacts, after: calc.ExampleFacts, d: calc.Difference
) -> dict[str, list[dict[str, Any]]]:
    def listed(moves: list[tuple[int, float]]) -> list[dict[str, Any]]:
        return [
            {
                "example_id": str(ids[i]),
                "before": r12(float(before.value[i])),
                "after": r12(float(after.value[i])),
                "change": r12(change),
            }
            for i, change in moves
        ]

    return {
        "top_drops": listed(calc.largest_moves(d, gains=False)),
        "top_gains": listed(calc.largest_moves(d, gains=True)),
    }


def diff_check(
    after: Side,
    before: Side,
    check_id: str,
    rows: tuple[np.ndarray, np.ndarray],
    datasets: tuple[DatasetIndex, DatasetIndex],
) -> CheckDiff:
    """One matched check's diff from both sides' case rows (before, after)."""
    after_check, before_check = after.checks[check_id], before.checks[check_id]
    method = after_check.method
    before_facts = example_facts_of(rows[0], datasets[0], before_check, method)
    after_facts = example_facts_of(rows[1], datasets[1], after_check, method)
    ids, before_facts, after_facts, shared = _aligned(
        before_facts, after_facts, datasets[0], datasets[1]
    )
    codes = calc.transition_codes(before_facts, after_facts)
    alpha = float(after.body["decision_rule"]["alpha"])
    everything = np.ones(len(ids), dtype=np.bool_)
    seed = calc.diff_seed(str(after.report_id), str(before.report_id), check_id)
    group = calc.group_diff(before_facts, after_facts, codes, everything, alpha, seed)
    before_body, after_body = before.check(check_id), after.check(check_id)
    answer = {
        "check_id": check_id,
        "method": method,
        "outcome_measure": "pass_rate" if method in PASS_FAIL_METHODS else method,
        **_group_answer(
            None,
            group,
            before_body,
            after_body,
            (_own_score(before_facts, everything), _own_score(after_facts, everything)),
        ),
        "cases_proven_against": {
            "after": after_body.get("cases"),
            "before": before_body.get("cases"),
        },
    }
    answer["difference"]["method"] = calc.DIFFERENCE_METHOD
    if method not in PASS_FAIL_METHODS:
        answer.update(_moves(ids, before_facts, after_facts, group.difference))
    else:
        regressed = np.flatnonzero((codes // 4 == calc.PASSED) & (codes % 4 != calc.PASSED))
        answer["top_drops"] = [
            {"example_id": str(ids[i]), "before": "pass", "after": calc.OUTCOMES[codes[i] % 4]}
            for i in regressed[: calc.TOP]
        ]
    slices, masks = _slice_answers(
        after, before, check_id, (before_facts, after_facts), codes, ids, shared, datasets
    )
    answer["slices"] = slices
    found = CheckDiff(check_id, ids, codes, answer, masks, (before_facts.value, after_facts.value))
    answer["changes"] = [
        found.page(name, None, FIRST_PAGE)
        for name, count in group.transitions.items()
        if count and changed(name)
    ]
    return found


def _slice_answers(
    after: Side,
    before: Side,
    check_id: str,
    facts: tuple[calc.ExampleFacts, calc.ExampleFacts],
    codes: np.ndarray,
    ids: Sequence[str],
    shared: DatasetIndex | None,
    datasets: tuple[DatasetIndex, DatasetIndex],
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Each slice of the candidate's check compared (its examples by the suite's tag), and the
    slices' masks over `ids`."""
    before_facts, after_facts = facts
    alpha = float(after.body["decision_rule"]["alpha"])
    before_body, after_body = before.check(check_id), after.check(check_id)
    slices = []
    masks: dict[str, np.ndarray] = {}
    before_slices = {s["name"]: s for s in before_body.get("slices") or []}
    suite_check = after.definitions[check_id]
    for item in after_body.get("slices") or []:
        definition = next(
            (s for s in suite_check.get("slices") or [] if s["name"] == item["name"]), None
        )
        if definition is None:
            continue
        mask = masks[item["name"]] = _tag_mask(definition["tag"], ids, shared, datasets)
        slice_seed = calc.diff_seed(
            str(after.report_id), str(before.report_id), check_id, item["name"]
        )
        slice_group = calc.group_diff(before_facts, after_facts, codes, mask, alpha, slice_seed)
        slices.append(
            _group_answer(
                item["name"],
                slice_group,
                before_slices.get(item["name"]),
                item,
                (_own_score(before_facts, mask), _own_score(after_facts, mask)),
            )
        )
    return slices, masks


def changed(transition: str) -> bool:
    """Whether a transition ("pass-fail") changes the outcome."""
    before, after = transition.split("-")
    return before != after
