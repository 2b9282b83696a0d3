"""One example of a report on its own page: its input and expected answer, its own outcome in
every check apart from the check's result, and, reached from a comparison, the other report's
repeats and outputs beside this one's. Also the outputs a comparison's example rows show."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import BadRequest, NotFound
from app.domain.example_outcomes import ExampleOutcome, example_outcome
from app.identity.auth import Principal
from app.repositories import case_diffs as case_repo
from app.repositories import reports as report_repo
from app.repositories.raw import driver_of
from app.services.diff_checks import Side
from app.services.diffs import ReportDiff, load_side
from app.services.drilldown import Neighbours, neighbours
from app.services.kit.compiled import SuiteCache

EXPECTED_KEYS = ("expected", "expected_answer", "target", "answer", "reference", "ideal")
# The most repeats of one example the comparison's rows read for each side.
ROW_REPEATS = 20


@dataclass
class ExampleOfDataset:
    """An example as one of the report's dataset versions holds it."""

    dataset: str
    digest: str
    tags: list[str]
    body: Any
    removed: bool
    expected: Any = None


@dataclass
class Against:
    """The report an example page is compared with (reached from a comparison): its id, its
    result and the example's cases and outcomes there, by check."""

    report_id: str
    result: str
    cases: dict[str, list[Any]]
    outcomes: dict[str, ExampleOutcome]


@dataclass
class ExamplePage:
    """One example of a report: its input, every check's repeats and its own outcome there,
    where else to see it, and the report it is compared with (if any)."""

    report_id: str
    body: dict[str, Any]
    example_id: str
    examples: list[ExampleOfDataset]
    cases: dict[str, list[Any]]
    neighbours: Neighbours
    with_body: bool
    outcomes: dict[str, ExampleOutcome] = field(default_factory=dict)
    against: Against | None = None


def _expected(body: Any) -> Any:
    if isinstance(body, dict):
        for key in EXPECTED_KEYS:
            if key in body:
                return body[key]
    return None


async def _examples_of(
    connection: Any, side: Side, example_id: str, with_body: bool
) -> list[ExampleOfDataset]:
    examples: list[ExampleOfDataset] = []
    seen: set[uuid.UUID] = set()
    refs = {(d["name"], str(d["version"])): d for d in side.body.get("dataset_refs", [])}
    for check_id, check in side.checks.items():
        if check.dataset_version_id in seen:
            continue
        seen.add(check.dataset_version_id)
        row = await case_repo.example_body(connection, check.dataset_version_id, example_id)
        if row is None:
            continue
        dataset = side.definitions[check_id]["dataset"]
        ref = refs.get((dataset["name"], str(dataset["version"])), {})
        body = orjson.loads(row["body"]) if with_body and row["body"] is not None else None
        examples.append(
            ExampleOfDataset(
                f"{dataset['name']} v{dataset['version']}",
                row["body_digest"] or ref.get("digest", ""),
                list(row["tags"]),
                body,
                row["body"] is None,
                _expected(body),
            )
        )
    return examples


async def _cases_by_check(
    connection: Any, side: Side, example_id: str, with_body: bool
) -> tuple[dict[str, list[Any]], dict[str, ExampleOutcome]]:
    cases: dict[str, list[Any]] = {c["check_id"]: [] for c in side.body["checks"]}
    for row in await case_repo.example_cases(connection, side.evaluation_id, example_id, with_body):
        cases.setdefault(row["check_id"], []).append(row)
    outcomes = {c: example_outcome(r["status"] for r in rows) for c, rows in cases.items()}
    return cases, outcomes


async def example_page(
    session: AsyncSession,
    principal: Principal,
    suites: SuiteCache,
    report_id: uuid.UUID,
    example_id: str,
    against: uuid.UUID | None = None,
) -> ExamplePage:
    """An example's input and expected answer (with dataset.read_body), every check's cases
    and the example's outcome in each; with `against`, that report's beside them."""
    if against == report_id:
        raise BadRequest("against names this report itself: compare with another report")
    side, _ = await load_side(session, principal, suites, report_id)
    connection = await driver_of(session)
    with_body = principal.has("dataset.read_body")
    examples = await _examples_of(connection, side, example_id, with_body)
    if not examples:
        raise NotFound(f"no example {example_id!r} in this report's datasets")
    supersedes = await report_repo.superseded_by(session, principal.project_id, report_id)
    cases, outcomes = await _cases_by_check(connection, side, example_id, with_body)
    other = None
    if against is not None:
        other_side, _ = await load_side(session, principal, suites, against)
        other_cases, other_outcomes = await _cases_by_check(
            connection, other_side, example_id, with_body
        )
        other = Against(str(against), other_side.body["result"], other_cases, other_outcomes)
    return ExamplePage(
        str(report_id),
        side.body,
        example_id,
        examples,
        cases,
        await neighbours(
            session,
            principal,
            side.body,
            [str(r) for r in supersedes],
            None if side.superseded_by is None else str(side.superseded_by),
        ),
        with_body,
        outcomes,
        other,
    )


@dataclass
class SideBySide:
    """One example of one check in both reports of a comparison: each side's repeats."""

    before: list[Any]
    after: list[Any]


async def compared_outputs(
    session: AsyncSession,
    principal: Principal,
    diff: ReportDiff,
    wanted: dict[str, list[str]],
) -> dict[tuple[str, str], SideBySide]:
    """The repeats (outputs with dataset.read_body) of the examples a comparison lists, by
    (check id, example id), read for both reports: two queries a check."""
    connection = await driver_of(session)
    with_output = principal.has("dataset.read_body")
    found: dict[tuple[str, str], SideBySide] = {}
    for check_id, example_ids in wanted.items():
        ids = sorted(set(example_ids))
        if not ids:
            continue
        sides = []
        for side in (diff.before, diff.after):
            rows = await case_repo.cases_page(
                connection,
                side.evaluation_id,
                check_id,
                after=None,
                status=None,
                example_ids=ids,
                tag=None,
                dataset_version_id=side.checks[check_id].dataset_version_id,
                limit=len(ids) * ROW_REPEATS,
                with_output=with_output,
            )
            by_example: dict[str, list[Any]] = {}
            for row in rows:
                by_example.setdefault(row["example_id"], []).append(row)
            sides.append(by_example)
        for example_id in ids:
            found[(check_id, example_id)] = SideBySide(
                sides[0].get(example_id, []), sides[1].get(example_id, [])
            )
    return found
