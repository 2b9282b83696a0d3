"""The diff of two reports (docs/compare.md): checks matched by id, examples by id, each
example's transition, McNemar's exact test, the paired difference, and pages of the examples
behind each transition. Reports never change, so a diff is computed once and kept."""

from __future__ import annotations

import asyncio
import bisect
import re
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation import diff as calc
from app.aggregation.inputs import DatasetIndex
from app.aggregation.rounding import r12
from app.auth import Principal
from app.db import reading
from app.errors import BadRequest, NotFound, ValidationFailed
from app.repositories import case_diffs as repo
from app.repositories import definitions as definition_repo
from app.repositories import evaluations as evaluation_repo
from app.repositories.raw import driver_of
from app.services import reports as report_service
from app.services.compiled import CompiledCheck, SuiteCache

PAGE_LIMIT = 100
FIRST_PAGE = 20
# The example id's UTF-8 bytes in hex: every string of this form names a position (the place
# of its decoded text in byte order), so a well-formed cursor is never refused.
CURSOR_PATTERN = r"^(?:[0-9a-f]{2}){1,800}$"
READ_STREAMS = 4


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
            following = encode_cursor(ids[-1])
        return {
            "check_id": self.check_id,
            "transition": transition,
            "count": int(positions.size),
            "example_ids": ids,
            "next_cursor": following,
        }


@dataclass
class ReportDiff:
    """Two reports compared: the matched checks and the unmatched ones."""

    after: Side
    before: Side
    checks: dict[str, CheckDiff]
    only_after: list[str]
    only_before: list[str]

    def summary(self) -> dict[str, Any]:
        """The diff's answer: both reports, every matched check, the unmatched ones."""
        return {
            "after": self.after.reference(),
            "before": self.before.reference(),
            "checks": [c.answer for c in self.checks.values()],
            "unmatched_checks": {"only_after": self.only_after, "only_before": self.only_before},
        }

    def check(self, check_id: str) -> CheckDiff:
        """A matched check, or 404."""
        found = self.checks.get(check_id)
        if found is None:
            raise NotFound(f"check {check_id!r} is not in both reports")
        return found


class DiffCache:
    """The last few diffs computed (two immutable reports always diff the same way)."""

    def __init__(self, capacity: int = 8) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[uuid.UUID, uuid.UUID, uuid.UUID], ReportDiff] = OrderedDict()
        self._locks: dict[tuple[uuid.UUID, uuid.UUID, uuid.UUID], asyncio.Lock] = {}

    def get(self, key: tuple[uuid.UUID, uuid.UUID, uuid.UUID]) -> ReportDiff | None:
        """A kept diff, or None."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def keep(self, key: tuple[uuid.UUID, uuid.UUID, uuid.UUID], value: ReportDiff) -> None:
        """Keep a diff, dropping the least recently used beyond capacity."""
        self._items[key] = value
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def lock(self, key: tuple[uuid.UUID, uuid.UUID, uuid.UUID]) -> asyncio.Lock:
        """One computation of a diff at a time: a second request waits for the first."""
        if len(self._locks) > 4 * self.capacity:
            self._locks = {k: v for k, v in self._locks.items() if v.locked()}
        return self._locks.setdefault(key, asyncio.Lock())


def encode_cursor(example_id: str) -> str:
    """The cursor after an example id."""
    return example_id.encode().hex()


def decode_cursor(cursor: str) -> str:
    """The example id a cursor names (400 for a string not of CURSOR_PATTERN)."""
    if re.fullmatch(CURSOR_PATTERN, cursor) is None:
        raise BadRequest("cursor is not a cursor this service issued")
    return bytes.fromhex(cursor).decode("utf-8", "replace")


async def load_side(
    session: AsyncSession, principal: Principal, suites: SuiteCache, report_id: uuid.UUID
) -> tuple[Side, dict[str, DatasetIndex]]:
    """A report of the caller's project with its compiled suite and its checks' datasets."""
    report, envelope = await report_service.get(session, principal, report_id)
    body = orjson.loads(report.body)
    evaluation = await evaluation_repo.get(
        session, principal.project_id, uuid.UUID(body["evaluation_id"])
    )
    if evaluation is None:
        raise NotFound("no such report")
    suite_version = await definition_repo.get_suite_version_by_id(
        session, evaluation.suite_version_id
    )
    assert suite_version is not None
    compiled = await suites.get(session, suite_version)
    datasets = {
        check_id: await suites.dataset(session, check.dataset_version_id)
        for check_id, check in compiled.checks.items()
    }
    side = Side(
        report.id,
        report.digest,
        body,
        evaluation.id,
        compiled.checks,
        envelope.status,
        envelope.superseded_by,
        {c["check_id"]: c for c in compiled.content["checks"]},
    )
    return side, datasets


def _facts(
    rows: np.ndarray, dataset: DatasetIndex, check: CompiledCheck, method: str
) -> calc.ExampleFacts:
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
    before_facts = _facts(rows[0], datasets[0], before_check, method)
    after_facts = _facts(rows[1], datasets[1], after_check, method)
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
        "outcome_measure": "pass_rate" if method in calc.PASS_FAIL_METHODS else method,
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
    if method not in calc.PASS_FAIL_METHODS:
        answer.update(_moves(ids, before_facts, after_facts, group.difference))
    else:
        regressed = np.flatnonzero((codes // 4 == calc.PASSED) & (codes % 4 != calc.PASSED))
        answer["top_drops"] = [
            {"example_id": str(ids[i]), "before": "pass", "after": calc.OUTCOMES[codes[i] % 4]}
            for i in regressed[: calc.TOP]
        ]
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
    answer["slices"] = slices
    found = CheckDiff(check_id, ids, codes, answer, masks, (before_facts.value, after_facts.value))
    answer["changes"] = [
        found.page(name, None, FIRST_PAGE)
        for name, count in group.transitions.items()
        if count and _changed(name)
    ]
    return found


def _changed(transition: str) -> bool:
    before, after = transition.split("-")
    return before != after


async def _diffs(
    session: AsyncSession,
    reader_pool: Any,
    sides: tuple[Side, Side],
    datasets: tuple[dict[str, DatasetIndex], dict[str, DatasetIndex]],
    check_ids: list[str],
) -> dict[str, CheckDiff]:
    """Each matched check's diff. With a pool, checks are read on several connections at once
    and each is computed (in a thread) as soon as both its sides are read, so PostgreSQL's
    scans and the arithmetic overlap."""
    after, before = sides

    def compute(check_id: str, rows: tuple[np.ndarray, np.ndarray]) -> CheckDiff:
        sets = (datasets[1][check_id], datasets[0][check_id])
        return diff_check(after, before, check_id, rows, sets)

    if reader_pool is None:
        driver = await driver_of(session)
        found = {}
        for check_id in check_ids:
            rows = (
                await repo.narrow_columns(driver, before.evaluation_id, check_id),
                await repo.narrow_columns(driver, after.evaluation_id, check_id),
            )
            found[check_id] = await asyncio.to_thread(compute, check_id, rows)
        return found
    streams = asyncio.Semaphore(READ_STREAMS)

    async def read(evaluation_id: uuid.UUID, check_id: str) -> np.ndarray:
        async with streams, reading(reader_pool) as connection:
            return await repo.narrow_columns(connection, evaluation_id, check_id)

    async def one(check_id: str) -> CheckDiff:
        rows = await asyncio.gather(
            read(before.evaluation_id, check_id), read(after.evaluation_id, check_id)
        )
        return await asyncio.to_thread(compute, check_id, (rows[0], rows[1]))

    return dict(zip(check_ids, await asyncio.gather(*map(one, check_ids)), strict=True))


async def report_diff(
    session: AsyncSession,
    principal: Principal,
    suites: SuiteCache,
    cache: DiffCache,
    report_id: uuid.UUID,
    other_id: uuid.UUID,
    reader_pool: Any = None,
) -> ReportDiff:
    """The diff of report `report_id` (after) against `other_id` (before), both of the
    caller's project; computed once, then kept."""
    if report_id == other_id:
        raise ValidationFailed(
            "a report diffed with itself changes nothing: name two different reports",
            errors=[{"loc": ["path", "other_id"], "msg": "the same report as report_id"}],
        )
    after, after_sets = await load_side(session, principal, suites, report_id)
    before, before_sets = await load_side(session, principal, suites, other_id)
    key = (principal.project_id, report_id, other_id)
    async with cache.lock(key):
        found = cache.get(key)
        if found is not None:
            return found
        before_ids = [c["check_id"] for c in before.body["checks"]]
        matched = [
            c["check_id"]
            for c in after.body["checks"]
            if c["check_id"] in before_ids and c["check_id"] in before.checks
        ]
        checks = await _diffs(
            session, reader_pool, (after, before), (after_sets, before_sets), matched
        )
        found = ReportDiff(
            after,
            before,
            checks,
            [c["check_id"] for c in after.body["checks"] if c["check_id"] not in checks],
            [c for c in before_ids if c not in checks],
        )
        cache.keep(key, found)
        return found


def _record(row: Any, offset: int) -> dict[str, Any] | None:
    if row[offset] is None:
        return None
    record = dict(
        zip(repo.RECORD_FIELDS, row[offset : offset + len(repo.RECORD_FIELDS)], strict=True)
    )
    record["evidence_refs"] = record["evidence_refs"] or []
    return record


async def changed_case_lines(reader_pool: Any, found: ReportDiff, check_id: str | None) -> Any:
    """One NDJSON line per case (of every matched check, or of one) whose status or score
    changed, with both records (null where a report has no such case)."""
    checks = [found.check(check_id).check_id] if check_id else list(found.checks)
    width = len(repo.RECORD_FIELDS)
    async with reading(reader_pool) as connection, connection.transaction(readonly=True):
        for check in checks:
            batches = repo.changed_cases(
                connection, found.after.evaluation_id, found.before.evaluation_id, check
            )
            async for batch in batches:
                yield b"".join(
                    orjson.dumps(
                        {
                            "check_id": check,
                            "example_id": row[0],
                            "repeat": row[1],
                            "before": _record(row, 2),
                            "after": _record(row, 2 + width),
                        },
                        option=orjson.OPT_APPEND_NEWLINE,
                    )
                    for row in batch
                )
