"""Finishing and cancelling evaluations: aggregate, then issue the report in one transaction."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation.engine import aggregate
from app.aggregation.inputs import AggregationInput, DatasetIndex
from app.auth import Principal, assurance_cap
from app.canonical import canonical_and_digest, timestamp
from app.db import reading
from app.errors import NotFound
from app.models import Evaluation
from app.repositories import case_columns
from app.repositories import definitions as definition_repo
from app.repositories import reports as repo
from app.repositories.raw import driver_of
from app.services import signing, transparency
from app.services.compiled import CompiledSuite, SuiteCache
from app.services.notifications import announce_superseded
from app.tree_hashing import TreeHasher

logger = logging.getLogger(__name__)
SCHEMA_VERSION = "1.0"
PRODUCER = "svc_evalbook"


async def _dataset_indexes(
    session: AsyncSession, compiled: CompiledSuite, cache: SuiteCache
) -> tuple[dict[str, DatasetIndex], list[dict[str, str]]]:
    indexes: dict[str, DatasetIndex] = {}
    refs: list[dict[str, str]] = []
    for check in compiled.content["checks"]:
        ref = check["dataset"]
        if ref["digest"] in indexes:
            continue
        # The compiled suite resolved the dataset version, and the suite cache read its
        # examples once, for ingestion's validation too.
        dataset_version_id = compiled.checks[check["check_id"]].dataset_version_id
        indexes[ref["digest"]] = await cache.dataset(session, dataset_version_id)
        refs.append(
            {
                "id": str(dataset_version_id),
                "name": ref["name"],
                "version": ref["version"],
                "digest": ref["digest"],
            }
        )
    return indexes, refs


async def _scorers(
    session: AsyncSession, project_id: uuid.UUID, content: dict[str, Any]
) -> tuple[dict[tuple[str, str], str], dict[str, tuple[float, float] | None]]:
    names = sorted({check["scorer"]["name"] for check in content["checks"]})
    digests: dict[tuple[str, str], str] = {}
    ranges: dict[str, tuple[float, float] | None] = {}
    for scorer in await definition_repo.scorers_named(session, project_id, names):
        digests[(scorer.name, scorer.version)] = scorer.digest
        ranges[scorer.digest] = (
            None
            if scorer.score_lo is None or scorer.score_hi is None
            else (scorer.score_lo, scorer.score_hi)
        )
    return digests, ranges


READ_STREAMS = 3
# Without the application's hasher (a caller outside the service), trees hash in a thread.
_THREAD_HASHER = TreeHasher(workers=0, min_leaves=0)


async def _read_check(
    connection: Any,
    evaluation_id: uuid.UUID,
    check: dict[str, Any],
    scorer_digests: dict[tuple[str, str], str],
    work_mem: str,
) -> tuple[Any, tuple[str, int] | None]:
    """One check's cases, decoded from a binary COPY stream (in a thread), and its SQL-joined
    evidence list when its cases carry trace digests or evidence refs."""
    from app.services import report_inputs

    data = await case_columns.copy_columns(
        connection,
        evaluation_id,
        check["check_id"],
        report_inputs.fresh_versions(check, scorer_digests),
        work_mem,
    )
    rows = await asyncio.to_thread(report_inputs.decode_rows, data)
    evidence = None
    if report_inputs.needs_joined_evidence(rows):
        evidence = await case_columns.evidence_document(
            connection, evaluation_id, check["check_id"]
        )
    return rows, evidence


async def _decoded(read: tuple[Any, tuple[str, int] | None], hasher: TreeHasher) -> Any:
    """A check's columns (in a thread) and its tree's root (in a worker process when large)."""
    from app.services import report_inputs

    rows, evidence = read
    ordered, leaves = await asyncio.to_thread(report_inputs.ordered_with_leaves, rows)
    root = await hasher.root(leaves)
    del leaves
    return await asyncio.to_thread(report_inputs.check_columns, ordered, evidence, root)


async def _cases(
    session: AsyncSession,
    reader_pool: Any,
    evaluation_id: uuid.UUID,
    content: dict[str, Any],
    scorer_digests: dict[tuple[str, str], str],
    *,
    committed: bool,
    work_mem: str,
    hasher: TreeHasher,
) -> dict[str, Any]:
    """Read an evaluation's cases, one check at a time. Committed cases (all of them once
    the evaluation is locked FOR UPDATE, except the `cancelled` ones a cancel just wrote) are
    read on several connections at once, so PostgreSQL scans on more than one core while the
    checks already read are decoded; a check with no case is left out."""
    checks = content["checks"]
    started = time.perf_counter()
    columns: dict[str, Any] = {}
    if committed and reader_pool is not None:
        # READ_STREAMS scans at a time; a connection is handed back as soon as its check is
        # read, so the scans go on while read checks are decoded, and at most one more read
        # check than there are scans waits for decoding (memory stays bounded).
        scans = asyncio.Semaphore(READ_STREAMS)
        held = asyncio.Semaphore(READ_STREAMS + 1)

        async def read(check: dict[str, Any]) -> Any:
            async with held:
                async with scans, reading(reader_pool) as connection:
                    raw = await _read_check(
                        connection, evaluation_id, check, scorer_digests, work_mem
                    )
                return await _decoded(raw, hasher)

        read_columns = await asyncio.gather(*map(read, checks))
    else:
        driver = await driver_of(session)
        read_columns = [
            await _decoded(
                await _read_check(driver, evaluation_id, check, scorer_digests, work_mem), hasher
            )
            for check in checks
        ]
    for check, check_columns in zip(checks, read_columns, strict=True):
        if check_columns.size:
            columns[check["check_id"]] = check_columns
    logger.info("read cases into columns in %.2f s", time.perf_counter() - started)
    return columns


async def issue(
    session: AsyncSession,
    principal: Principal,
    evaluation_id: uuid.UUID,
    *,
    cancel: bool,
    cache: SuiteCache,
    signer: signing.Signer,
    reader_pool: Any = None,
    finish_work_mem: str = "256MB",
    hasher: TreeHasher | None = None,
) -> tuple[uuid.UUID, bool]:
    """Finish (or cancel) an evaluation; return (report id, created). Idempotent."""
    hasher = hasher or _THREAD_HASHER
    evaluation = await repo.lock_evaluation(session, principal.project_id, evaluation_id)
    if evaluation is None:
        raise NotFound("no such evaluation")
    existing = await repo.get_for_evaluation(session, principal.project_id, evaluation_id)
    if existing is not None:
        return existing[0].id, False
    suite_version = await definition_repo.get_suite_version_by_id(
        session, evaluation.suite_version_id
    )
    assert suite_version is not None
    compiled = await cache.get(session, suite_version)
    content = compiled.content
    if cancel:
        cap = assurance_cap(principal, evaluation.execution_mode)
        for check in compiled.checks.values():
            await repo.insert_cancelled_cases(
                session,
                evaluation.id,
                check.check_id,
                check.dataset_version_id,
                check.repeats,
                check.pinned_version,
                check.pinned_digest,
                cap,
            )
    started = time.perf_counter()
    datasets, dataset_refs = await _dataset_indexes(session, compiled, cache)
    scorer_digests, score_ranges = await _scorers(session, principal.project_id, content)
    cases = await _cases(
        session,
        reader_pool,
        evaluation.id,
        content,
        scorer_digests,
        committed=not cancel,
        work_mem=finish_work_mem,
        hasher=hasher,
    )
    baseline_cases, baseline_report_digest = None, None
    if evaluation.baseline_evaluation_id is not None:
        baseline_report = await repo.get_for_evaluation(
            session, principal.project_id, evaluation.baseline_evaluation_id
        )
        if baseline_report is not None:
            baseline_report_digest = baseline_report[0].digest
        baseline_cases = await _cases(
            session,
            reader_pool,
            evaluation.baseline_evaluation_id,
            content,
            scorer_digests,
            committed=True,
            work_mem=finish_work_mem,
            hasher=hasher,
        )
    read = time.perf_counter()
    look = None
    if evaluation.mode == "gate":
        # Taken before the look is counted, so two finishes of one subject count 1 and 2.
        await repo.lock_subject_suite(
            session, principal.project_id, evaluation.subject_digest, suite_version.suite_id
        )
        if content.get("reevaluation_spending", "none") != "none":
            earlier = await repo.count_gate_reports(
                session, principal.project_id, evaluation.subject_digest, suite_version.suite_id
            )
            look = earlier + 1
    aggregated = await asyncio.to_thread(
        aggregate,
        AggregationInput(
            evaluation_id=str(evaluation.id),
            suite=content,
            datasets=datasets,
            score_ranges=score_ranges,
            cases=cases,
            baseline_evaluation_id=None
            if evaluation.baseline_evaluation_id is None
            else str(evaluation.baseline_evaluation_id),
            baseline_cases=baseline_cases,
            baseline_report_digest=baseline_report_digest,
            look=look,
        ),
    )
    aggregated_at = time.perf_counter()
    signing_key = await signing.hold_active_key(session)
    report_id = uuid.uuid4()
    issued_at = datetime.now(UTC)
    valid_until = issued_at + timedelta(hours=float(content["validity_hours"]))
    body = {
        "schema_version": SCHEMA_VERSION,
        "producer": PRODUCER,
        "organization": {"id": str(principal.organization_id), "slug": principal.organization_slug},
        "project": {"id": str(principal.project_id), "slug": principal.project_slug},
        "report_id": str(report_id),
        "evaluation_id": str(evaluation.id),
        "subject": orjson.loads(evaluation.subject),
        "suite_ref": {
            "id": str(suite_version.id),
            "name": content["name"],
            "version": suite_version.version,
            "digest": suite_version.digest,
        },
        "dataset_refs": dataset_refs,
        "mode": evaluation.mode,
        "execution_mode": evaluation.execution_mode,
        **aggregated.body,
        "issued_at": timestamp(issued_at),
        "valid_until": timestamp(valid_until),
    }
    body_bytes, digest = await asyncio.to_thread(canonical_and_digest, body)
    # Manifests read from the database were settled in their stored form as they were read.
    stored_manifests = await asyncio.to_thread(
        lambda: {check_id: listed.stored() for check_id, listed in aggregated.manifests.items()}
    )
    await repo.insert_report(
        session,
        report={
            "id": report_id,
            "project_id": principal.project_id,
            "evaluation_id": evaluation.id,
            "suite_id": suite_version.suite_id,
            "suite_version_id": suite_version.id,
            "subject_digest": evaluation.subject_digest,
            "mode": evaluation.mode,
            "result": body["result"],
            "body": body_bytes,
            "digest": digest,
            "issued_at": issued_at,
            "valid_until": valid_until,
        },
        check_rows=[
            {
                "report_id": report_id,
                "check_id": check["check_id"],
                "position": position,
                "required": check["required"],
                "status": check["status"],
                "result": check["result"],
                "score": check["score"],
                "case_count": cases[check["check_id"]].size if check["check_id"] in cases else 0,
            }
            for position, check in enumerate(body["checks"])
        ],
        manifests=[
            {
                "report_id": report_id,
                "check_id": check_id,
                "digests": digests,
                "digest": next(c for c in body["checks"] if c["check_id"] == check_id)[
                    "evidence_refs"
                ][0],
            }
            for check_id, digests in stored_manifests.items()
        ],
    )
    attestation_digest = await signing.attest_report(
        session, signer, signing_key, report_id, body_bytes, digest, body["subject"]
    )
    logged = [
        (
            "report",
            report_id,
            transparency.report_entry(
                report_id,
                digest,
                attestation_digest,
                evaluation.subject_digest,
                body["suite_ref"],
                issued_at,
            ),
        )
    ]
    if evaluation.mode == "gate":
        superseded = await repo.supersede_current(
            session,
            principal.project_id,
            evaluation.subject_digest,
            suite_version.suite_id,
            report_id,
            issued_at,
        )
        statements = await signing.attest_supersessions(
            session,
            signer,
            signing_key,
            superseded,
            (report_id, digest),
            "re_evaluation",
            issued_at,
        )
        logged += [
            (
                "supersession",
                earlier,
                transparency.supersession_entry(earlier, report_id, statement, issued_at),
            )
            for earlier, statement in statements
        ]
        await announce_superseded(session, principal.project_id, superseded, report_id)
    await repo.insert_envelope(
        session,
        {
            "report_id": report_id,
            "project_id": principal.project_id,
            "suite_id": suite_version.suite_id,
            "suite_version_id": suite_version.id,
            "subject_digest": evaluation.subject_digest,
            "mode": evaluation.mode,
            "status": "current",
            "expires_at": valid_until,
            "issued_at": issued_at,
        },
    )
    await _close_evaluation(session, evaluation, "cancelled" if cancel else "finished", issued_at)
    # Last: the log's append lock is held from here until the transaction commits.
    await transparency.append(session, logged)
    logger.info(
        "issued report %s: read cases %.2f s, aggregated %.2f s, wrote %.2f s",
        report_id,
        read - started,
        aggregated_at - read,
        time.perf_counter() - aggregated_at,
    )
    return report_id, True


async def _close_evaluation(
    session: AsyncSession, evaluation: Evaluation, status: str, at: datetime
) -> None:
    evaluation.status = status
    evaluation.finished_at = at
    await session.flush()
