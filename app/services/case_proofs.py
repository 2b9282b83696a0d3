"""One case proven against an issued report: its record and RFC 6962 audit path."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from app.digest import merkle
from app.digest.canonical import digest_of_bytes
from app.domain.errors import Conflict, IntegrityFailure, NotFound
from app.identity.auth import Principal
from app.platform.db import ReadConnection
from app.repositories import case_trees as repo
from app.services import reports
from app.services.incidents import IncidentRecorder
from app.services.kit.case_trees import CaseTreeCache, TreeMismatch


@dataclass(frozen=True, slots=True)
class CheckRef:
    """What proving a check's cases needs from the report body."""

    cases: dict[str, Any] | None
    comparative: bool
    baseline_evaluation_id: uuid.UUID | None
    baseline_cases: dict[str, Any] | None
    scorer: dict[str, Any]
    # A measure check has no cases of its own: it commits to those of the check it measures.
    cases_of: str | None = None


@dataclass(frozen=True, slots=True)
class ReportRef:
    """What proving a report's cases needs from its body (reports never change)."""

    evaluation_id: uuid.UUID
    checks: dict[str, CheckRef]
    # The report's digest, for an incident.
    digest: str = ""


def report_ref(body: dict[str, Any], digest: str = "") -> ReportRef:
    """The parts of a report body the proofs read."""
    checks = {}
    for check in body["checks"]:
        comparison = check.get("comparison") or {}
        baseline = comparison.get("baseline_evaluation_id")
        checks[check["check_id"]] = CheckRef(
            cases=check.get("cases"),
            comparative=bool(comparison),
            baseline_evaluation_id=None if baseline is None else uuid.UUID(baseline),
            baseline_cases=comparison.get("baseline_cases"),
            scorer=check["scorer_ref"],
            cases_of=(check.get("measure") or {}).get("of"),
        )
    return ReportRef(uuid.UUID(body["evaluation_id"]), checks, digest)


async def _report_ref(
    reader: ReadConnection, principal: Principal, trees: CaseTreeCache, report_id: uuid.UUID
) -> ReportRef:
    key = (principal.project_id, report_id)
    cached = trees.reports.get(key)
    if isinstance(cached, ReportRef):
        return cached
    view = await reports.read(reader, principal, report_id)
    ref = report_ref(orjson.loads(view.body), view.digest)
    trees.keep_report(key, ref)
    return ref


def _tree_ref(
    report: ReportRef, check_id: str, baseline: bool
) -> tuple[uuid.UUID, CheckRef, dict[str, Any]]:
    """(evaluation id, the check, its committed {count, root}) or a typed error."""
    check = report.checks.get(check_id)
    if check is None:
        raise NotFound(f"the report has no check {check_id!r}")
    if not baseline:
        if check.cases is None:
            raise Conflict("this report was issued before reports committed to their cases")
        return report.evaluation_id, check, check.cases
    if check.baseline_evaluation_id is None:
        raise NotFound(f"check {check_id!r} is not compared with a baseline")
    if check.baseline_cases is None:
        raise Conflict("this report was issued before reports committed to their cases")
    return check.baseline_evaluation_id, check, check.baseline_cases


async def case_proof(
    reader: ReadConnection,
    principal: Principal,
    trees: CaseTreeCache,
    report_id: uuid.UUID,
    check_id: str,
    example_id: str,
    repeat: int,
    *,
    baseline: bool,
    incidents: IncidentRecorder,
) -> bytes:
    """The case's record, leaf index, tree size and audit path, as JSON bytes."""
    report = await _report_ref(reader, principal, trees, report_id)
    evaluation_id, check, committed = _tree_ref(report, check_id, baseline)
    # The stored cases of a measure check are those of the check it measures, whose tree its
    # body commits to; looking under its own id would find none and cry tampering.
    stored = check.cases_of or check_id
    root = merkle.from_hex_digest(committed["root"])
    try:
        tree = await trees.get(reader, evaluation_id, stored, committed["count"], root)
    except TreeMismatch as exc:
        await incidents.open(principal.project_id, report_id, report.digest, "cases", str(exc))
        raise IntegrityFailure(str(exc)) from None
    index = tree.index_of(example_id, repeat)
    if index is None:
        which = "baseline's case" if baseline else "case"
        raise NotFound(f"no {which} {example_id!r}/{repeat} of check {check_id!r} in this report")
    row = await repo.case_row(reader, evaluation_id, stored, example_id, repeat)
    scorer = check.scorer
    digest = scorer["digest"]
    if row["scorer_version"] != scorer["version"]:
        digest = await repo.scorer_digest(
            reader, principal.project_id, scorer["name"], row["scorer_version"]
        )
    record = merkle.stored_case_record(example_id, repeat, row, digest or "")
    problem = _stored_problem(record, row, tree.leaf(index), f"{check_id}/{example_id}/{repeat}")
    if problem is not None:
        await incidents.open(principal.project_id, report_id, report.digest, *problem)
        raise IntegrityFailure(problem[1])
    answer: dict[str, Any] = {
        "report_id": str(report_id),
        "check_id": check_id,
        "baseline": baseline,
        "record": orjson.Fragment(record),
        "leaf_index": index,
        "tree_size": tree.size,
        "root": committed["root"],
        "audit_path": merkle.digests(tree.audit_path(index)),
    }
    if principal.has("dataset.read_body") and row["output"] is not None:
        answer["output"] = orjson.Fragment(row["output"])
    return orjson.dumps(answer)


def _stored_problem(record: bytes, row: Any, leaf: bytes, name: str) -> tuple[str, str] | None:
    """(part, what) when the stored case no longer matches its leaf or its output its digest."""
    if merkle.leaf_hash(record) != leaf or row["leaf"] != leaf:
        return "cases", f"the stored case {name} no longer matches its leaf"
    output = row["output"]
    if output is not None and digest_of_bytes(output.encode()) != row["output_digest"]:
        return "outputs", f"the stored output of {name} no longer matches its digest"
    return None
