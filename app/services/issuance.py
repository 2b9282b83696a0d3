"""Finishing and cancelling evaluations: aggregate, then issue the report in one transaction."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import Counter
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation.engine import Aggregate, aggregate
from app.aggregation.inputs import AggregationInput, CaseColumns, DatasetIndex
from app.digest.canonical import canonical_and_digest
from app.domain.errors import NotFound
from app.domain.records import ReportRecords
from app.domain.suites import CompiledSuite, scored_checks
from app.identity.auth import Principal, assurance_cap
from app.models import Evaluation, SigningKey, SuiteVersion
from app.repositories import definitions as definition_repo
from app.repositories import evaluations as evaluation_repo
from app.repositories import raw, reads
from app.repositories import reports as repo
from app.services import signing, transparency
from app.services.case_reading import CaseReading, read_cases
from app.services.kit.compiled import SuiteCache, suite_of
from app.services.labels import finish_labels
from app.services.notifications import announce_superseded
from app.services.report_body import (
    Issuing,
    Sealed,
    envelope_record,
    report_body,
    report_records,
)

logger = logging.getLogger(__name__)


async def _dataset_indexes(
    session: AsyncSession, compiled: CompiledSuite, cache: SuiteCache
) -> tuple[dict[str, DatasetIndex], list[dict[str, str]]]:
    indexes: dict[str, DatasetIndex] = {}
    refs: list[dict[str, str]] = []
    for check in scored_checks(compiled.content):
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
    names = sorted({check["scorer"]["name"] for check in scored_checks(content)})
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


@dataclass(frozen=True, slots=True)
class Finishing:
    """What issuing a report needs: the compiled suites, the signer, how cases are read, and
    the counter of issued reports."""

    suites: SuiteCache
    signer: signing.Signer
    reading: CaseReading
    issued: Counter


@dataclass(frozen=True, slots=True)
class Issued:
    """What finishing did: the report, whether it was issued now, and how many cases it read."""

    report_id: uuid.UUID
    created: bool
    cases_read: int


@dataclass(frozen=True, slots=True)
class FinishInputs:
    """Everything the engine aggregates, read in the finishing transaction."""

    dataset_refs: list[dict[str, Any]]
    aggregation: AggregationInput
    cases: dict[str, CaseColumns]


async def issue(
    session: AsyncSession,
    principal: Principal,
    evaluation_id: uuid.UUID,
    *,
    cancel: bool,
    needs: Finishing,
) -> Issued:
    """Finish (or cancel) an evaluation. Idempotent. Four steps: read the inputs, aggregate
    (in a thread), build the body, persist it."""
    locked = await _lock(session, principal, evaluation_id)
    if isinstance(locked, uuid.UUID):
        return Issued(locked, False, 0)
    evaluation = locked
    suite_version, compiled = await suite_of(session, needs.suites, evaluation.suite_version_id)
    if cancel:
        await _write_cancelled(session, principal, evaluation, compiled)
    started = time.perf_counter()
    inputs = await _read_inputs(
        session, principal, evaluation, compiled, needs, committed=not cancel
    )
    read = time.perf_counter()
    look = await _look(session, principal, evaluation, suite_version.suite_id, compiled.content)
    aggregated = await asyncio.to_thread(
        aggregate, dataclasses.replace(inputs.aggregation, look=look)
    )
    aggregated_at = time.perf_counter()
    # The active key is held before the issue time is taken: a rotation waits for this report,
    # so the key that signs it was active when it was issued.
    signing_key = await signing.hold_active_key(session)
    issued = Issuing.now(compiled.content)
    body = report_body(
        principal,
        evaluation,
        suite_version,
        compiled.content["name"],
        inputs.dataset_refs,
        aggregated.results,
        issued,
    )
    await _persist(
        session,
        principal,
        (needs.signer, signing_key),
        evaluation,
        suite_version,
        body,
        aggregated,
        inputs.cases,
        issued,
        cancelled=cancel,
    )
    logger.info(
        "issued report %s: read cases %.2f s, aggregated %.2f s, wrote %.2f s",
        issued.report_id,
        read - started,
        aggregated_at - read,
        time.perf_counter() - aggregated_at,
    )
    return Issued(issued.report_id, True, sum(c.size for c in inputs.cases.values()))


async def _lock(
    session: AsyncSession, principal: Principal, evaluation_id: uuid.UUID
) -> uuid.UUID | Evaluation:
    """The evaluation, locked; or the id of the report it already has (finishing is
    idempotent)."""
    evaluation = await evaluation_repo.lock(session, principal.project_id, evaluation_id)
    if evaluation is None:
        raise NotFound("no such evaluation")
    connection = await raw.read_connection(session)
    existing = await reads.stored_for_evaluation(connection, principal.project_id, evaluation_id)
    if existing is not None:
        return existing.id
    return evaluation


async def _write_cancelled(
    session: AsyncSession, principal: Principal, evaluation: Evaluation, compiled: CompiledSuite
) -> None:
    """Write a `cancelled` case for every case a cancelled evaluation never sent."""
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


async def _read_inputs(
    session: AsyncSession,
    principal: Principal,
    evaluation: Evaluation,
    compiled: CompiledSuite,
    needs: Finishing,
    *,
    committed: bool,
) -> FinishInputs:
    """The engine's inputs: datasets, scorers, the cases and the baseline's cases."""
    content = compiled.content
    datasets, dataset_refs = await _dataset_indexes(session, compiled, needs.suites)
    scorer_digests, score_ranges = await _scorers(session, principal.project_id, content)

    async def cases_of(evaluation_id: uuid.UUID, committed: bool) -> dict[str, CaseColumns]:
        return await read_cases(
            session,
            needs.reading,
            evaluation_id,
            content,
            scorer_digests,
            committed=committed,
            expected=compiled.expected_cases,
        )

    cases = await cases_of(evaluation.id, committed)
    labels = await finish_labels(session, evaluation.id, content, datasets)
    baseline_cases, baseline_report_digest, baseline_labels = None, None, None
    baseline_id = evaluation.baseline_evaluation_id
    if baseline_id is not None:
        connection = await raw.read_connection(session)
        baseline_report = await reads.stored_for_evaluation(
            connection, principal.project_id, baseline_id
        )
        if baseline_report is not None:
            baseline_report_digest = baseline_report.digest
        baseline_cases = await cases_of(baseline_id, True)
        baseline_labels = await finish_labels(session, baseline_id, content, datasets)
    aggregation = AggregationInput(
        evaluation_id=str(evaluation.id),
        suite=content,
        datasets=datasets,
        score_ranges=score_ranges,
        cases=cases,
        baseline_evaluation_id=None if baseline_id is None else str(baseline_id),
        baseline_cases=baseline_cases,
        baseline_report_digest=baseline_report_digest,
        look=None,
        labels=labels,
        baseline_labels=baseline_labels,
    )
    return FinishInputs(dataset_refs, aggregation, cases)


async def _look(
    session: AsyncSession,
    principal: Principal,
    evaluation: Evaluation,
    suite_id: uuid.UUID,
    content: dict[str, Any],
) -> int | None:
    """Which look at this subject and suite a gate report is, where the suite spends alpha
    over re-evaluations; else None."""
    if evaluation.mode != "gate":
        return None
    # Taken before the look is counted, so two finishes of one subject count 1 and 2.
    await repo.lock_subject_suite(
        session, principal.project_id, evaluation.subject_digest, suite_id
    )
    if content.get("reevaluation_spending", "none") == "none":
        return None
    earlier = await repo.count_gate_reports(
        session, principal.project_id, evaluation.subject_digest, suite_id
    )
    return earlier + 1


async def _records(
    aggregated: Aggregate,
    issued: Issuing,
    evaluation: Evaluation,
    suite_version: SuiteVersion,
    sealed: Sealed,
    cases: dict[str, CaseColumns],
) -> ReportRecords:
    """The report's rows; its manifests in their stored form (made in a thread)."""
    # Manifests read from the database were settled in their stored form as they were read.
    stored_manifests = await asyncio.to_thread(
        lambda: {check_id: listed.stored() for check_id, listed in aggregated.manifests.items()}
    )
    case_counts = {check_id: columns.size for check_id, columns in cases.items()}
    return report_records(
        aggregated.results, issued, evaluation, suite_version, sealed, case_counts, stored_manifests
    )


async def _persist(
    session: AsyncSession,
    principal: Principal,
    signing_with: tuple[signing.Signer, SigningKey],
    evaluation: Evaluation,
    suite_version: SuiteVersion,
    body: dict[str, Any],
    aggregated: Aggregate,
    cases: dict[str, CaseColumns],
    issued: Issuing,
    *,
    cancelled: bool,
) -> None:
    """Store the report and its rows, attest it (`signing_with`: the signer and the held key),
    supersede, write the envelope, close the evaluation, and append to the log."""
    signer, signing_key = signing_with
    report_id, issued_at = issued.report_id, issued.issued_at
    body_bytes, digest = await asyncio.to_thread(canonical_and_digest, body)
    records = await _records(
        aggregated, issued, evaluation, suite_version, Sealed(body_bytes, digest), cases
    )
    await repo.insert_report(session, records)
    await signing.attest_report(
        session, signer, signing_key, report_id, body_bytes, digest, body["subject"]
    )
    superseded: list[uuid.UUID] = []
    if evaluation.mode == "gate":
        superseded = await _supersede(
            session,
            principal,
            signer,
            signing_key,
            suite_version.suite_id,
            evaluation,
            (report_id, digest),
            issued_at,
        )
    await repo.insert_envelope(session, envelope_record(issued, evaluation, suite_version))
    await evaluation_repo.close(
        session, evaluation, "cancelled" if cancelled else "finished", issued_at
    )
    # Last: the log's append lock is held from here until the transaction commits.
    await transparency.append(session, "report", [report_id])
    await transparency.append(session, "supersession", superseded)


async def _supersede(
    session: AsyncSession,
    principal: Principal,
    signer: signing.Signer,
    signing_key: SigningKey,
    suite_id: uuid.UUID,
    evaluation: Evaluation,
    successor: tuple[uuid.UUID, str],
    issued_at: datetime,
) -> list[uuid.UUID]:
    """Supersede the subject's current gate reports of the suite by the new one: signed
    statements and announcements; the superseded reports (their statements to log)."""
    report_id = successor[0]
    superseded = await repo.supersede_current(
        session, principal.project_id, evaluation.subject_digest, suite_id, report_id, issued_at
    )
    statements = await signing.attest_supersessions(
        session, signer, signing_key, superseded, successor, "re_evaluation", issued_at
    )
    await announce_superseded(session, principal.project_id, superseded, report_id)
    return [earlier for earlier, _ in statements]
