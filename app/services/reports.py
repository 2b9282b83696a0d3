"""Reading, listing and verifying reports; the evaluator health view."""

from __future__ import annotations

import base64
import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.digest.canonical import digest_of_bytes, is_canonical, timestamp
from app.domain.errors import NotFound
from app.domain.reports import ReportView, StoredView
from app.formats.test_result import report_page
from app.identity.auth import Principal
from app.models import CheckResult, Report, ReportEnvelope
from app.platform.db import ReadConnection
from app.platform.metrics import Metrics
from app.repositories import raw, reads
from app.repositories import reports as repo
from app.schemas.report_queries import ForSubjectQuery
from app.schemas.reports import EvaluatorHealth, IncidentOut, ResolvedOut, VerifyOut
from app.services import integrity
from app.services.case_integrity import Finding


def envelope(env: ReportView, public_base_url: str, now: datetime) -> dict[str, Any]:
    """The envelope as served; `expired` is computed now."""
    api = f"{public_base_url.rstrip('/')}/evaluations/api/reports/{env.report_id}"
    return {
        "status": env.status,
        "superseded_by": None if env.superseded_by is None else str(env.superseded_by),
        "superseded_at": None if env.superseded_at is None else timestamp(env.superseded_at),
        "superseded_reason": env.superseded_reason,
        "expires_at": timestamp(env.expires_at),
        "expired": env.expires_at <= now,
        # An open incident: the stored report no longer verifies; forSubject leaves it out.
        "integrity": "incident" if env.has_open_incident else "ok",
        "url": report_page(public_base_url.rstrip("/"), str(env.report_id)),
        "attestation": f"{api}/attestation",
        "supersession_attestation": f"{api}/supersession-attestation"
        if env.status == "superseded"
        else None,
        # The log's promise: the entry's index, and where its inclusion proof is served.
        "log_index": env.log_index,
        "log": f"{api}/log",
    }


def representation(view: ReportView, public_base_url: str, now: datetime | None = None) -> bytes:
    """`{"report_id", "digest", "body", "envelope"}` with the stored body bytes spliced in
    (`expired` as of `now`, by default this moment)."""
    head = orjson.dumps({"report_id": str(view.id), "digest": view.digest})
    tail = orjson.dumps(envelope(view, public_base_url, now or datetime.now(UTC)))
    return head[:-1] + b',"body":' + view.body + b',"envelope":' + tail + b"}"


def join_representations(items: list[bytes], **fields: Any) -> bytes:
    """An object of `fields` plus `"reports": [...]` holding already-rendered reports."""
    opening = orjson.dumps(fields)[:-1] + b',"reports":['
    if len(items) < 2:
        return opening + b"".join(items) + b"]}"
    # One join copies the (large) page once; the opening and closing go with the first and
    # last report.
    return b",".join([opening + items[0], *items[1:-1], items[-1] + b"]}"])


async def find(
    reader: ReadConnection, principal: Principal, report_id: uuid.UUID
) -> ReportView | None:
    """A report of the caller's project for the read paths, or None."""
    return await reads.report(reader, principal.project_id, report_id)


async def read(reader: ReadConnection, principal: Principal, report_id: uuid.UUID) -> ReportView:
    """A report of the caller's project for the read paths, or 404."""
    found = await find(reader, principal, report_id)
    if found is None:
        raise NotFound("no such report")
    return found


async def served(
    reader: ReadConnection, principal: Principal, report_id: uuid.UUID, public_base_url: str
) -> bytes:
    """A report's representation as served, or 404."""
    view = await read(reader, principal, report_id)
    return representation(view, public_base_url)


async def get(session: AsyncSession, principal: Principal, report_id: uuid.UUID) -> StoredView:
    """A report of the caller's project, or 404."""
    connection = await raw.read_connection(session)
    found = await reads.stored(connection, principal.project_id, report_id)
    if found is None:
        raise NotFound("no such report")
    return found


async def stored_rows(
    session: AsyncSession, principal: Principal, report_id: uuid.UUID
) -> tuple[Report, ReportEnvelope]:
    """A report's two stored rows, each column as stored (what an integrity check audits), or
    404."""
    found = await repo.get_with_envelope(session, principal.project_id, report_id)
    if found is None:
        raise NotFound("no such report")
    return found


async def for_evaluation(
    session: AsyncSession, principal: Principal, evaluation_id: uuid.UUID
) -> StoredView:
    """The report of an evaluation, or 404 until it is issued."""
    connection = await raw.read_connection(session)
    found = await reads.stored_for_evaluation(connection, principal.project_id, evaluation_id)
    if found is None:
        raise NotFound("no report has been issued for this evaluation")
    return found


async def current_for_subject(
    reader: ReadConnection, principal: Principal, query: ForSubjectQuery, now: datetime
) -> list[ReportView]:
    """The current gate reports about a subject, one per suite, unexpired at `now` unless the
    query includes the expired; a report with an open incident is not offered (a gate must not
    pass on a report that no longer verifies)."""
    return [
        view
        for view in await reads.current_for_subject(reader, principal.project_id, query.digest)
        if query.include_expired or view.expires_at > now
    ]


async def for_subject(
    reader: ReadConnection, principal: Principal, query: ForSubjectQuery, public_base_url: str
) -> bytes:
    """`{"subject_digest", "reports": [...]}`: the current reports about a subject."""
    now = datetime.now(UTC)
    views = await current_for_subject(reader, principal, query, now)
    return join_representations(
        [representation(v, public_base_url, now) for v in views], subject_digest=query.digest
    )


def repr_digest(body: bytes) -> str:
    """The RFC 9530 `Repr-Digest` header value of the body bytes."""
    return "sha-256=:" + base64.b64encode(hashlib.sha256(body).digest()).decode() + ":"


async def body_bytes(
    reader: ReadConnection, principal: Principal, report_id: uuid.UUID
) -> tuple[bytes, str]:
    """A report's stored canonical bytes and their `Repr-Digest`, or 404."""
    report = await read(reader, principal, report_id)
    return report.body, repr_digest(report.body)


def derived_mismatches(
    report: Report, envelope: ReportEnvelope, checks: list[CheckResult], body: Any
) -> list[str]:
    """The stored columns derived from a report's body that no longer agree with it (they
    drive filters, `forSubject` and the pages, so an edit of them must not go unnoticed)."""
    if not isinstance(body, dict):
        return ["body"]
    subject_digest = _field(body.get("subject"), "digest")
    suite_version_id = _field(body.get("suite_ref"), "id")
    project_id = _field(body.get("project"), "id")
    expected: dict[str, Any] = {
        "reports.id": body.get("report_id"),
        "reports.evaluation_id": body.get("evaluation_id"),
        "reports.project_id": project_id,
        "reports.result": body.get("result"),
        "reports.mode": body.get("mode"),
        "reports.subject_digest": subject_digest,
        "reports.suite_version_id": suite_version_id,
        "reports.issued_at": body.get("issued_at"),
        "reports.valid_until": body.get("valid_until"),
        "report_envelopes.project_id": project_id,
        "report_envelopes.mode": body.get("mode"),
        "report_envelopes.subject_digest": subject_digest,
        "report_envelopes.suite_version_id": suite_version_id,
        "report_envelopes.expires_at": body.get("valid_until"),
        "report_envelopes.issued_at": body.get("issued_at"),
    }
    stored: dict[str, Any] = {
        "reports.id": str(report.id),
        "reports.evaluation_id": str(report.evaluation_id),
        "reports.project_id": str(report.project_id),
        "reports.result": report.result,
        "reports.mode": report.mode,
        "reports.subject_digest": report.subject_digest,
        "reports.suite_version_id": str(report.suite_version_id),
        "reports.issued_at": timestamp(report.issued_at),
        "reports.valid_until": timestamp(report.valid_until),
        "report_envelopes.project_id": str(envelope.project_id),
        "report_envelopes.mode": envelope.mode,
        "report_envelopes.subject_digest": envelope.subject_digest,
        "report_envelopes.suite_version_id": str(envelope.suite_version_id),
        "report_envelopes.expires_at": timestamp(envelope.expires_at),
        "report_envelopes.issued_at": timestamp(envelope.issued_at),
    }
    differing = [column for column, value in stored.items() if expected[column] != value]
    body_checks = [c for c in body.get("checks", []) if isinstance(c, dict)]
    stored_checks = [(c.check_id, c.required, c.status, c.result) for c in checks]
    if stored_checks != [
        (c.get("check_id"), c.get("required"), c.get("status"), c.get("result"))
        for c in body_checks
    ]:
        differing.append("check_results")
    return differing


def _field(part: Any, name: str) -> Any:
    return part.get(name) if isinstance(part, dict) else None


async def verify(
    session: AsyncSession,
    principal: Principal,
    report_id: uuid.UUID,
    metrics: Metrics | None = None,
) -> VerifyOut:
    """Re-hash the stored bytes, check they are canonical, and check every stored column
    derived from the body against it; any disagreement opens an incident."""
    report, envelope = await stored_rows(session, principal, report_id)
    answer = await check_report(
        session, report, envelope, await repo.check_rows(session, report_id)
    )
    await repo.record_verifications(session, [(report.id, answer.verified)], datetime.now(UTC))
    if metrics is not None:
        metrics.open_incidents.set(await repo.count_open_incidents(session))
    return answer


async def integrity_findings(
    session: AsyncSession,
    report: Report,
    envelope: ReportEnvelope,
    checks: list[CheckResult],
    found_before: integrity.Lookups | None = None,
    *,
    cases: bool = True,
) -> tuple[list[Finding], str, bool, list[str]]:
    """What no longer verifies of one stored report: its digest and canonical bytes, the
    columns derived from it, its attestation, its cases roots re-hashed from the rows, its
    stored outputs and its envelope against the signed supersessions. Also the computed
    digest, whether the bytes are canonical, and the derived columns that disagree. Without
    `cases`, the cases trees and outputs are left to the caller (an export proves them as it
    writes them)."""
    computed = digest_of_bytes(report.body)
    canonical = is_canonical(report.body)
    try:
        body = orjson.loads(report.body)
    except orjson.JSONDecodeError:
        body = None
    mismatches = derived_mismatches(report, envelope, checks, body)
    found: list[Finding] = []
    if computed != report.digest:
        found.append(Finding("digest", "the stored body bytes no longer hash to the digest"))
    if not canonical:
        found.append(Finding("canonical", "the stored body bytes are not canonical JSON"))
    if mismatches:
        found.append(
            Finding("derived", "stored columns disagree with the body: " + ", ".join(mismatches))
        )
    if isinstance(body, dict):
        found += await integrity.findings(
            session, report, envelope, body, found_before, cases=cases
        )
    return found, computed, canonical, mismatches


async def check_report(
    session: AsyncSession,
    report: Report,
    envelope: ReportEnvelope,
    checks: list[CheckResult],
    found_before: integrity.Lookups | None = None,
) -> VerifyOut:
    """Verify one stored report (for any project, `integrity_findings`); a failure opens an
    incident naming the first part that failed."""
    found, computed, canonical, mismatches = await integrity_findings(
        session, report, envelope, checks, found_before
    )
    if found:
        await repo.open_incident(
            session,
            {
                "project_id": report.project_id,
                "report_id": report.id,
                "kind": INCIDENT_KINDS[found[0].part],
                "stored_digest": report.digest,
                "computed_digest": computed,
                "detail": "; ".join(str(f) for f in found)[:2000],
            },
        )
    checked_at = datetime.now(UTC)
    return VerifyOut(
        report_id=str(report.id),
        verified=not found,
        stored_digest=report.digest,
        computed_digest=computed,
        canonical=canonical,
        mismatches=mismatches,
        failed=list(dict.fromkeys(f.part for f in found)),
        findings=[str(f) for f in found],
        checked_at=timestamp(checked_at),
    )


# The incident kind of the first part that failed (kinds issued before keep their names).
INCIDENT_KINDS = {
    "digest": "digest_mismatch",
    "canonical": "not_canonical",
    "derived": "derived_mismatch",
    "attestation": "attestation_mismatch",
    "cases": "cases_mismatch",
    "labels": "labels_mismatch",
    "outputs": "output_mismatch",
    "envelope": "envelope_mismatch",
}


async def resolve_incident(
    session: AsyncSession, principal: Principal, incident_id: int, reason: str
) -> ResolvedOut:
    """Close one of the project's open incidents, recording which token did and why (the
    log's own incidents are the database owner's: `evalbook incidents resolve`)."""
    if await repo.incident_project(session, incident_id) != principal.project_id:
        raise NotFound("no open incident of this project with that id")
    actor = f"token {principal.token_id} ({principal.token_name})"
    at = await repo.resolve_incident(session, incident_id, actor, reason)
    return ResolvedOut(
        incident_id=incident_id, resolved_at=timestamp(at), actor=actor, reason=reason
    )


async def evaluator_health(
    session: AsyncSession, principal: Principal, metrics: Metrics
) -> EvaluatorHealth:
    """Open incidents of the caller's project (and the service-wide count, as a gauge)."""
    metrics.open_incidents.set(await repo.count_open_incidents(session))
    incidents = await repo.open_incidents(session, principal.project_id)
    return EvaluatorHealth(
        status="incidents" if incidents else "ok",
        open_incidents=[
            IncidentOut(
                incident_id=i.id,
                report_id=str(i.report_id),
                kind=i.kind,
                stored_digest=i.stored_digest,
                computed_digest=i.computed_digest,
                detail=i.detail,
                detected_at=timestamp(i.detected_at),
            )
            for i in incidents
        ],
    )
