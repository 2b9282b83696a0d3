"""One case proven against an issued report: its record and RFC 6962 audit path."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from app import merkle
from app.auth import Principal
from app.errors import Conflict, InternalError, NotFound
from app.repositories import case_trees as repo
from app.services import reports
from app.services.case_trees import CaseTreeCache, TreeMismatch


def _tree_ref(body: dict[str, Any], check_id: str, baseline: bool) -> tuple[uuid.UUID, Any, dict]:
    """(evaluation id, the check's body, its committed {count, root}) or a typed error."""
    check = next((c for c in body["checks"] if c["check_id"] == check_id), None)
    if check is None:
        raise NotFound(f"the report has no check {check_id!r}")
    if not baseline:
        tree = check.get("cases")
        if tree is None:
            raise Conflict("this report was issued before reports committed to their cases")
        return uuid.UUID(body["evaluation_id"]), check, tree
    comparison = check.get("comparison")
    if comparison is None or comparison.get("baseline_evaluation_id") is None:
        raise NotFound(f"check {check_id!r} is not compared with a baseline")
    tree = comparison.get("baseline_cases")
    if tree is None:
        raise Conflict("this report was issued before reports committed to their cases")
    return uuid.UUID(comparison["baseline_evaluation_id"]), check, tree


async def case_proof(
    reader: Any,
    principal: Principal,
    trees: CaseTreeCache,
    report_id: uuid.UUID,
    check_id: str,
    example_id: str,
    repeat: int,
    *,
    baseline: bool,
) -> bytes:
    """The case's record, leaf index, tree size and audit path, as JSON bytes."""
    view = await reports.read(reader, principal, report_id)
    body = orjson.loads(view.body)
    evaluation_id, check, committed = _tree_ref(body, check_id, baseline)
    root = merkle.from_hex_digest(committed["root"])
    try:
        tree = await trees.get(reader, evaluation_id, check_id, committed["count"], root)
    except TreeMismatch as exc:
        raise InternalError(str(exc)) from None
    index = tree.index_of(example_id, repeat)
    if index is None:
        which = "baseline's case" if baseline else "case"
        raise NotFound(f"no {which} {example_id!r}/{repeat} of check {check_id!r} in this report")
    row = await repo.case_row(reader, evaluation_id, check_id, example_id, repeat)
    scorer = check["scorer_ref"]
    digest = scorer["digest"]
    if row["scorer_version"] != scorer["version"]:
        digest = await repo.scorer_digest(
            reader, principal.project_id, scorer["name"], row["scorer_version"]
        )
    record = merkle.case_record(
        example_id,
        repeat,
        row["status"],
        row["score"],
        row["output_digest"],
        row["trace_digest"],
        row["evidence_refs"],
        row["assurance"],
        digest or "",
    )
    if merkle.leaf_hash(record) != tree.leaf(index) or row["leaf"] != tree.leaf(index):
        raise InternalError(f"the stored case {example_id!r}/{repeat} no longer matches its leaf")
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
