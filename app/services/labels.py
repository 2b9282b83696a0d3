"""Human labels of judged checks (docs/judges.md, section 2): posting them (all or nothing,
idempotent, only on sampled examples, only while the evaluation runs, only at an assurance
that counts), the page of examples still to label, and the labels a finish aggregates."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation.inputs import DatasetIndex, LabelColumns
from app.aggregation.label_input import StoredLabels, stored_label_columns
from app.digest.canonical import canonical_bytes
from app.domain.errors import Conflict, Forbidden, NotFound, validation_error
from app.domain.labels import COUNTING_ASSURANCE, label_value, stored_label_leaf
from app.domain.suites import CompiledSuite
from app.domain.vocabulary import ASSURANCE_RANK
from app.identity.auth import Principal, label_assurance
from app.repositories import evaluations as evaluation_repo
from app.repositories import labels as repo
from app.repositories.raw import driver_of, read_connection
from app.schemas.labels import LabelBatchOut, LabelIn, RequestedLabel, RequestedLabels
from app.services.kit.compiled import SuiteCache, compiled_of, pinned_scorers
from app.services.kit.cursors import label_after, label_cursor

DEFAULT_PAGE = 100


@dataclass(frozen=True)
class NumberedLabel:
    """A label with where it was sent: its place in the JSON list, or its NDJSON line."""

    label: LabelIn
    where: tuple[str | int, ...]


def judged_checks(content: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A suite content's judged checks, in suite order."""
    return [check for check in content["checks"] if "calibration" in check]


async def _running(
    session: AsyncSession, principal: Principal, evaluation_id: uuid.UUID, suites: SuiteCache
) -> CompiledSuite:
    """The evaluation's compiled suite, the evaluation held (share lock) while it runs."""
    evaluation = await evaluation_repo.get_for_ingestion(
        session, principal.project_id, evaluation_id
    )
    if evaluation is None:
        raise NotFound("no such evaluation")
    if evaluation.status != "running":
        raise Conflict(
            f"the evaluation is {evaluation.status}; its labels were frozen when it finished"
        )
    return await compiled_of(session, suites, evaluation.suite_version_id)


async def _score_ranges(
    session: AsyncSession, principal: Principal, compiled: CompiledSuite
) -> dict[str, tuple[float, float] | None]:
    """Per check, its pinned scorer version's score range (None: unbounded)."""
    scorers = await pinned_scorers(session, principal.project_id, compiled)
    ranges = {
        key: None
        if s.score_lo is None or s.score_hi is None
        else (float(s.score_lo), float(s.score_hi))
        for key, s in scorers.items()
    }
    return {
        check.check_id: ranges.get((check.scorer_name, check.pinned_version))
        for check in compiled.checks.values()
    }


def _checked(
    item: NumberedLabel,
    definitions: Mapping[str, dict[str, Any]],
    compiled: CompiledSuite,
    ranges: Mapping[str, tuple[float, float] | None],
    samples: Mapping[str, np.ndarray],
) -> tuple[float, int]:
    """A label's value and its example's position, once it is known to belong: a judged
    check, an example of its dataset in its sample, a value of the check's kind."""
    label, where = item.label, item.where
    definition = definitions.get(label.check_id)
    if definition is None:
        raise validation_error((*where, "check_id"), f"no check {label.check_id!r} in the suite")
    calibration = definition.get("calibration")
    if calibration is None:
        raise validation_error(
            (*where, "check_id"), f"check {label.check_id!r} is not judged: it takes no labels"
        )
    position = compiled.checks[label.check_id].example_positions.get(label.example_id)
    if position is None:
        raise validation_error(
            (*where, "example_id"), f"no example {label.example_id!r} in the check's dataset"
        )
    if not samples[label.check_id][position]:
        raise validation_error(
            (*where, "example_id"),
            f"example {label.example_id!r} is not in the label sample of {label.check_id!r}: "
            "labels outside the sample would tempt a selection (GET labels/requested lists it)",
        )
    return _value(label, definition, ranges.get(label.check_id), where), position


def _value(
    label: LabelIn,
    definition: Mapping[str, Any],
    score_range: tuple[float, float] | None,
    where: tuple[str | int, ...],
) -> float:
    """pass/fail on a pass_rate check; a number inside the scorer's range on a mean check."""
    method = definition["aggregation"]["method"]
    if method == "pass_rate":
        if not isinstance(label.label, str):
            raise validation_error((*where, "label"), "a pass_rate check's label is pass or fail")
        return label_value(label.label)
    if isinstance(label.label, str):
        raise validation_error((*where, "label"), "a mean check's label is a number, its score")
    value = float(label.label)
    if score_range is not None and not score_range[0] <= value <= score_range[1]:
        raise validation_error(
            (*where, "label"),
            f"{value:g} is outside the scorer's score_range [{score_range[0]:g}, "
            f"{score_range[1]:g}]",
        )
    return value


def _refuse_weak(principal: Principal) -> str:
    """The assurance the token's labels carry; 403 when no corrected verdict would count it."""
    assurance = label_assurance(principal)
    if ASSURANCE_RANK[assurance] < ASSURANCE_RANK[COUNTING_ASSURANCE]:
        raise Forbidden(
            f"this token's labels would be {assurance!r}, and a label counts only at "
            f"{COUNTING_ASSURANCE!r} or above: post labels with a labeller token"
        )
    return assurance


# A pass/fail label's canonical JSON, written once.
PASS_FAIL_JSON = {"pass": '"pass"', "fail": '"fail"'}


def _rows(
    items: Sequence[NumberedLabel],
    compiled: CompiledSuite,
    ranges: Mapping[str, tuple[float, float] | None],
    samples: Mapping[str, np.ndarray],
    assurance: str,
) -> tuple[repo.LabelRows, dict[tuple[str, str], NumberedLabel]]:
    """The labels as columns to store (with their leaves), each (check, example) once; a pair
    sent twice with different labels is a 422."""
    definitions = {c["check_id"]: c for c in compiled.content["checks"]}
    rows = repo.LabelRows([], [], [], [], [], [], [], [])
    seen: dict[tuple[str, str], NumberedLabel] = {}
    for item in items:
        value, position = _checked(item, definitions, compiled, ranges, samples)
        key = (item.label.check_id, item.label.example_id)
        first = seen.get(key)
        if first is not None:
            if first.label != item.label:
                raise validation_error(
                    item.where, f"a second, different label of {key[1]!r} in {key[0]!r}"
                )
            continue
        seen[key] = item
        rows.check_ids.append(key[0])
        rows.example_ids.append(key[1])
        sent = item.label.label
        label = PASS_FAIL_JSON[sent] if isinstance(sent, str) else canonical_bytes(sent).decode()
        rows.labels.append(label)
        rows.values.append(value)
        rows.labellers.append(item.label.labeller)
        rows.notes.append(item.label.note)
        rows.leaves.append(stored_label_leaf(key[0], key[1], label, item.label.labeller, assurance))
        rows.positions.append(position)
    return rows, seen


async def post(
    session: AsyncSession,
    principal: Principal,
    evaluation_id: uuid.UUID,
    items: Sequence[NumberedLabel],
    suites: SuiteCache,
) -> LabelBatchOut:
    """Store labels all or nothing; identical re-sends change nothing, different ones 409."""
    assurance = _refuse_weak(principal)
    compiled = await _running(session, principal, evaluation_id, suites)
    ranges = await _score_ranges(session, principal, compiled)
    samples = await _samples(session, compiled, suites)
    rows, seen = _rows(items, compiled, ranges, samples, assurance)
    writer = await driver_of(session)
    accepted = await repo.insert(writer, evaluation_id, assurance, principal.token_id, rows)
    if accepted < len(seen):
        # Some were held already (or a concurrent post stored them first): every label sent
        # must equal the one held, which for those stored now it does.
        stored = await repo.stored(writer, evaluation_id, list(seen))
        for key, item in seen.items():
            row, sent = stored[key], item.label
            mine = (canonical_bytes(sent.label).decode(), sent.labeller, sent.note)
            if (row["label"], row["labeller"], row["note"]) != mine:
                raise Conflict(
                    f"{'.'.join(map(str, item.where))}: example {key[1]!r} of {key[0]!r} "
                    "already holds another label; labels are never changed"
                )
    return LabelBatchOut(accepted=accepted, unchanged=len(seen) - accepted)


async def _requested_page(
    session: AsyncSession,
    principal: Principal,
    evaluation_id: uuid.UUID,
    compiled: CompiledSuite,
    suites: SuiteCache,
    after: tuple[int, int],
    limit: int,
) -> tuple[list[RequestedLabel], dict[str, dict[str, int]], str | None]:
    """The sampled examples after `after` (check index, example position), up to `limit`."""
    reader = await driver_of(session)
    with_bodies = principal.has("dataset.read_body")
    counts = await repo.labelled_counts(reader, evaluation_id)
    sampled: list[tuple[int, dict[str, Any], DatasetIndex, np.ndarray]] = []
    for index, check in enumerate(compiled.content["checks"]):
        if "calibration" in check:
            dataset_version_id = compiled.checks[check["check_id"]].dataset_version_id
            dataset = await suites.dataset(session, dataset_version_id)
            sampled.append((index, check, dataset, _sampled_positions(dataset, check)))
    totals = {
        check["check_id"]: {"sampled": int(p.size), "labelled": counts.get(check["check_id"], 0)}
        for _, check, _, p in sampled
    }
    # What remains after the cursor, check by check: (index, check, dataset, positions).
    remaining = []
    for index, check, dataset, positions in sampled:
        if index > after[0]:
            remaining.append((index, check, dataset, positions))
        elif index == after[0]:
            start = int(np.searchsorted(positions, after[1], side="right"))
            remaining.append((index, check, dataset, positions[start:]))
    page: list[RequestedLabel] = []
    next_cursor = None
    for number, (index, check, dataset, positions) in enumerate(remaining):
        chosen = positions[: limit - len(page)]
        rows = await repo.requested(
            reader,
            evaluation_id,
            check["check_id"],
            [dataset.ids[int(p)] for p in chosen],
            compiled.checks[check["check_id"]].dataset_version_id,
            with_bodies,
        )
        page.extend(_requested(check["check_id"], row, with_bodies) for row in rows)
        if len(page) >= limit:
            more = chosen.size < positions.size or any(r[3].size for r in remaining[number + 1 :])
            if more:
                next_cursor = label_cursor(index, int(chosen[-1]))
            break
    return page, totals, next_cursor


async def _samples(
    session: AsyncSession, compiled: CompiledSuite, suites: SuiteCache
) -> dict[str, np.ndarray]:
    """Per judged check, which of its dataset's examples (by position) its sample holds: the
    dataset index's cached draw, so a label costs a lookup rather than a hash."""
    found = {}
    for check in judged_checks(compiled.content):
        dataset_version_id = compiled.checks[check["check_id"]].dataset_version_id
        found[check["check_id"]] = _sample(await suites.dataset(session, dataset_version_id), check)
    return found


def _sample(dataset: DatasetIndex, check: Mapping[str, Any]) -> np.ndarray:
    """Which of the dataset's examples (id byte order) a judged check's sample holds."""
    calibration = check["calibration"]
    return dataset.label_sample(
        calibration["sample_seed"], check["check_id"], calibration["label_fraction"]
    )


def _sampled_positions(dataset: DatasetIndex, check: Mapping[str, Any]) -> np.ndarray:
    """The positions (id byte order) of a judged check's sampled examples."""
    return np.flatnonzero(_sample(dataset, check))


def _requested(check_id: str, row: Any, with_bodies: bool) -> RequestedLabel:
    """One requested example as answered."""
    return RequestedLabel(
        check_id=check_id,
        example_id=row["example_id"],
        labelled=row["labelled"],
        status=row["status"],
        input=orjson.loads(row["body"]) if with_bodies and row["body"] is not None else None,
        output=orjson.loads(row["output"]) if with_bodies and row["output"] is not None else None,
    )


async def requested(
    session: AsyncSession,
    principal: Principal,
    evaluation_id: uuid.UUID,
    suites: SuiteCache,
    cursor: str | None,
    limit: int = DEFAULT_PAGE,
) -> RequestedLabels:
    """The examples each judged check asks a human to label, a page at a time."""
    evaluation = await evaluation_repo.get(session, principal.project_id, evaluation_id)
    if evaluation is None:
        raise NotFound("no such evaluation")
    compiled = await compiled_of(session, suites, evaluation.suite_version_id)
    # Before the first check's first example, or after the one a cursor names.
    after = (0, -1) if cursor is None else label_after(cursor)
    page, totals, next_cursor = await _requested_page(
        session, principal, evaluation_id, compiled, suites, after, limit
    )
    return RequestedLabels(
        evaluation_id=str(evaluation_id), requested=page, totals=totals, next_cursor=next_cursor
    )


async def finish_labels(
    session: AsyncSession,
    evaluation_id: uuid.UUID,
    content: Mapping[str, Any],
    datasets: Mapping[str, DatasetIndex],
) -> dict[str, LabelColumns]:
    """An evaluation's labels for its finish, per judged check (none read without one)."""
    judged = judged_checks(content)
    if not judged:
        return {}
    rows = await repo.of_evaluation(await read_connection(session), evaluation_id)
    by_check: dict[str, StoredLabels] = {}
    for row in rows:
        stored = by_check.get(row["check_id"])
        if stored is None:
            stored = by_check[row["check_id"]] = StoredLabels()
        stored.example_ids.append(row["example_id"])
        stored.labels.append(row["label"])
        stored.values.append(row["value"])
        stored.labellers.append(row["labeller"])
        stored.assurances.append(row["assurance"])
        stored.leaves.append(row["leaf"])
        stored.positions.append(row["example_position"])
    return {
        check["check_id"]: stored_label_columns(
            check["check_id"],
            by_check.get(check["check_id"], StoredLabels()),
            datasets[check["dataset"]["digest"]],
        )
        for check in judged
    }
