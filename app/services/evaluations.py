"""Starting evaluations, reading their status and ingesting their cases."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client import Counter
from sqlalchemy.ext.asyncio import AsyncSession

from app.digest.canonical import canonical_and_digest, digest_of
from app.domain.errors import Conflict, NotFound, ValidationFailed, validation_error
from app.domain.suites import CompiledSuite
from app.domain.vocabulary import COMPARATIVE_RULES
from app.identity.auth import Principal, assurance_cap
from app.ingestion import CaseValidator, ScorerInfo, validate_batch
from app.models import Evaluation, SuiteVersion
from app.platform.memory import release_freed_memory
from app.platform.storage import ObjectStore
from app.repositories import cases as case_repo
from app.repositories import definitions as definition_repo
from app.repositories import evaluations as repo
from app.repositories import retention as retention_repo
from app.repositories.raw import on_session_end
from app.schemas.evaluations import (
    CaseBatchOut,
    CheckCounts,
    EvaluationOut,
    EvaluationStartIn,
    EvaluationStartOut,
    SuiteRefOut,
)
from app.services import issuance, reports
from app.services.issuance import Finishing
from app.services.kit.compiled import SuiteCache, compiled_of, pinned_scorers, suite_of

JSON_BATCH = 1000
# Cases a finish reads before it hands the freed heap back to the OS.
TRIM_AFTER_CASES = 100_000
# How a stored column is named in a case as sent.
CASE_FIELD_OF_COLUMN = {
    "output_digest": "output",
    "trace_id": "trace_ref",
    "trace_digest": "trace_ref",
}


def _suite_ref(suite_name: str, suite_version: SuiteVersion) -> SuiteRefOut:
    return SuiteRefOut(
        id=str(suite_version.id),
        name=suite_name,
        version=suite_version.version,
        digest=suite_version.digest,
    )


async def _resolve_suite_version(
    session: AsyncSession, principal: Principal, body: EvaluationStartIn, cache: SuiteCache
) -> SuiteVersion:
    suite = await definition_repo.get_suite(session, principal.project_id, body.suite.name)
    if suite is None:
        raise validation_error(("body", "suite", "name"), f"unknown suite {body.suite.name!r}")
    if body.suite.version is None:
        if suite.active_version_id is None:
            raise validation_error(("body", "suite"), "the suite has no active version")
        active, _ = await suite_of(session, cache, suite.active_version_id)
        return active
    found = await definition_repo.get_suite_version(session, suite.id, body.suite.version)
    if found is None:
        raise validation_error(
            ("body", "suite", "version"), f"unknown version {body.suite.version!r}"
        )
    return found


async def _check_baseline(
    session: AsyncSession,
    principal: Principal,
    body: EvaluationStartIn,
    suite_version: SuiteVersion,
    compiled: CompiledSuite,
) -> uuid.UUID | None:
    rule = compiled.content["decision_rule"]["rule"]
    if body.baseline_evaluation_id is None:
        # A gate under a comparative rule must compare; experiment and exploratory runs may
        # go without, which is how the first baseline of a suite version is produced.
        if rule in COMPARATIVE_RULES and body.mode == "gate":
            raise validation_error(
                ("body", "baseline_evaluation_id"), f"the rule {rule} needs a baseline evaluation"
            )
        return None
    if rule not in COMPARATIVE_RULES:
        raise validation_error(
            ("body", "baseline_evaluation_id"), f"the rule {rule} compares with no baseline"
        )
    baseline_id = uuid.UUID(body.baseline_evaluation_id)
    baseline = await repo.get(session, principal.project_id, baseline_id)
    if baseline is None:
        raise validation_error(("body", "baseline_evaluation_id"), "unknown evaluation")
    if baseline.suite_version_id != suite_version.id:
        raise validation_error(
            ("body", "baseline_evaluation_id"), "the baseline ran another suite version"
        )
    if baseline.status != "finished":
        raise validation_error(("body", "baseline_evaluation_id"), "the baseline is not finished")
    return baseline_id


async def start(
    session: AsyncSession,
    principal: Principal,
    body: EvaluationStartIn,
    idempotency_key: str | None,
    cache: SuiteCache,
) -> EvaluationStartOut:
    """Start an evaluation; a retried start with the same Idempotency-Key returns the first."""
    # A strict model keeps every value as sent, so the fields that were sent are the body.
    request_digest = digest_of(body.model_dump(mode="json", exclude_unset=True))
    if idempotency_key is not None:
        existing = await repo.get_by_idempotency_key(session, principal.project_id, idempotency_key)
        if existing is not None:
            return await _replay(session, existing, request_digest, cache)
    suite_version = await _resolve_suite_version(session, principal, body, cache)
    compiled = await cache.get(session, suite_version)
    baseline_id = await _check_baseline(session, principal, body, suite_version, compiled)
    subject = body.subject.model_dump(mode="json")
    subject_bytes, _ = canonical_and_digest(subject)
    evaluation_id = uuid.uuid4()
    inserted = await repo.insert_if_key_absent(
        session,
        {
            "id": evaluation_id,
            "project_id": principal.project_id,
            "suite_version_id": suite_version.id,
            "subject": subject_bytes.decode(),
            "subject_digest": body.subject.digest,
            "mode": body.mode,
            "execution_mode": body.execution_mode,
            "baseline_evaluation_id": baseline_id,
            "status": "running",
            "idempotency_key": idempotency_key,
            "request_digest": request_digest,
            "created_by_token_id": principal.token_id,
        },
    )
    if not inserted:
        assert idempotency_key is not None
        existing = await repo.get_by_idempotency_key(session, principal.project_id, idempotency_key)
        assert existing is not None
        return await _replay(session, existing, request_digest, cache)
    suite_name = compiled.content["name"]
    return EvaluationStartOut(
        evaluation_id=str(evaluation_id),
        status="running",
        suite_ref=_suite_ref(suite_name, suite_version),
        expected_cases=compiled.expected_cases,
    )


async def _replay(
    session: AsyncSession, existing: Evaluation, request_digest: str, cache: SuiteCache
) -> EvaluationStartOut:
    if existing.request_digest != request_digest:
        raise ValidationFailed(
            "this Idempotency-Key was used for a start with another body",
            errors=[{"loc": ["header", "Idempotency-Key"], "msg": "reused with another body"}],
        )
    suite_version, compiled = await suite_of(session, cache, existing.suite_version_id)
    return EvaluationStartOut(
        evaluation_id=str(existing.id),
        status=existing.status,
        suite_ref=_suite_ref(compiled.content["name"], suite_version),
        expected_cases=compiled.expected_cases,
    )


async def get(
    session: AsyncSession, principal: Principal, evaluation_id: uuid.UUID, cache: SuiteCache
) -> EvaluationOut:
    """An evaluation's status with counts per check."""
    evaluation = await repo.get(session, principal.project_id, evaluation_id)
    if evaluation is None:
        raise NotFound("no such evaluation")
    suite_version, compiled = await suite_of(session, cache, evaluation.suite_version_id)
    counts = await case_repo.counts_by_check(session, evaluation.id)
    checks = [
        CheckCounts(
            check_id=check.check_id,
            expected=check.expected_cases,
            received=sum(counts.get(check.check_id, {}).values()),
            by_status=counts.get(check.check_id, {}),
        )
        for check in compiled.checks.values()
    ]
    return EvaluationOut(
        evaluation_id=str(evaluation.id),
        status=evaluation.status,
        suite_ref=_suite_ref(compiled.content["name"], suite_version),
        subject=orjson.loads(evaluation.subject),
        mode=evaluation.mode,
        execution_mode=evaluation.execution_mode,
        baseline_evaluation_id=None
        if evaluation.baseline_evaluation_id is None
        else str(evaluation.baseline_evaluation_id),
        expected_cases=compiled.expected_cases,
        received_cases=sum(c.received for c in checks),
        checks=checks,
        created_at=evaluation.created_at,
        finished_at=evaluation.finished_at,
    )


async def _scorer_map(
    session: AsyncSession, principal: Principal, compiled: CompiledSuite
) -> dict[tuple[str, str], ScorerInfo]:
    scorers = await pinned_scorers(session, principal.project_id, compiled)
    return {
        key: ScorerInfo(scorer.digest, scorer.score_lo, scorer.score_hi)
        for key, scorer in scorers.items()
    }


@dataclass(frozen=True, slots=True)
class Ingesting:
    """What storing cases needs: the object store for long outputs, the compiled suites, the
    inline output limit, the rows per COPY chunk, and the counter of accepted cases."""

    store: ObjectStore
    suites: SuiteCache
    inline_limit: int
    chunk_rows: int
    accepted: Counter
    flush_seconds: float = math.inf


async def ingest(
    session: AsyncSession,
    principal: Principal,
    evaluation_id: uuid.UUID,
    cases: AsyncIterable[tuple[Sequence[int], list[Any]]],
    *,
    ndjson: bool,
    needs: Ingesting,
    interrupt: Callable[[], None] | None = None,
) -> CaseBatchOut:
    """Store a request's cases all or nothing; identical re-sends change nothing, others 409.
    `interrupt` is called if the database ends the session meanwhile (a stream waiting for
    its body then stops at once, and gives back its turn)."""
    evaluation = await repo.get_for_ingestion(session, principal.project_id, evaluation_id)
    if evaluation is None:
        raise NotFound("no such evaluation")
    if evaluation.status != "running":
        raise Conflict(f"the evaluation is {evaluation.status}; it takes no more cases")
    compiled = await compiled_of(session, needs.suites, evaluation.suite_version_id)
    validator = CaseValidator(
        evaluation_id=case_repo.driver_uuid(evaluation.id),
        suite=compiled,
        scorers=await _scorer_map(session, principal, compiled),
        assurance_cap=assurance_cap(principal, evaluation.execution_mode),
        object_prefix=f"outputs/{principal.organization_slug}/{principal.project_slug}",
        inline_limit=needs.inline_limit,
        ndjson=ndjson,
    )

    async with on_session_end(session, interrupt):
        writer = case_repo.CaseWriter(session, needs.chunk_rows, needs.flush_seconds)
        try:
            holds_object_lock = False
            async for numbers, batch in cases:
                validated = validate_batch(validator, numbers, batch)
                if validated.uploads and not holds_object_lock:
                    await writer.idle()
                    await retention_repo.lock_output_objects(session, shared=True)
                    holds_object_lock = True
                # The large outputs are stored before the rows that name them are written.
                for key, data in validated.uploads.items():
                    await needs.store.put(key, data, "application/json")
                if not await writer.add((numbers, validated.rows, validated.long_outputs)):
                    break
            result = await writer.close()
        except BaseException:
            await writer.abandon()
            raise
    if result.conflict is not None:
        raise _conflict(result.conflict, result.differing, ndjson)
    needs.accepted.inc(result.accepted)
    return CaseBatchOut(accepted=result.accepted, unchanged=result.unchanged)


def _conflict(index: int, differing: Sequence[str], ndjson: bool) -> Conflict:
    """409 for a case that differs from the stored one with its (check, example, repeat)."""
    where = f"line {index}" if ndjson else f"case {index}"
    fields = sorted({CASE_FIELD_OF_COLUMN.get(c, c) for c in differing})
    return Conflict(
        f"{where} differs from the stored case with the same (check, example, repeat) in: "
        f"{', '.join(fields)}",
        index=index,
    )


async def json_case_batches(cases: list[Any]) -> AsyncIterator[tuple[range, list[Any]]]:
    """A JSON body's cases with their indexes, in batches as NDJSON arrives."""
    for start in range(0, len(cases), JSON_BATCH):
        yield range(start, min(start + JSON_BATCH, len(cases))), cases[start : start + JSON_BATCH]


async def finish(
    session: AsyncSession,
    principal: Principal,
    evaluation_id: uuid.UUID,
    *,
    cancel: bool,
    needs: Finishing,
    public_url: str,
) -> tuple[bytes, bool]:
    """Issue (or cancel, then issue) the evaluation's report: (representation, created now)."""
    issued = await issuance.issue(session, principal, evaluation_id, cancel=cancel, needs=needs)
    if issued.cases_read >= TRIM_AFTER_CASES:
        # The finish's columns are garbage now; give their pages back rather than keep the peak
        # (a small report's few pages are not worth a walk of the whole heap).
        await asyncio.to_thread(release_freed_memory)
    view = await reports.get(session, principal, issued.report_id)
    if issued.created:
        needs.issued.inc()
    return reports.representation(view, public_url), issued.created


async def report_of(
    session: AsyncSession, principal: Principal, evaluation_id: uuid.UUID, public_url: str
) -> bytes:
    """The evaluation's report as served; 404 until it is issued."""
    view = await reports.for_evaluation(session, principal, evaluation_id)
    return reports.representation(view, public_url)
