"""Reports, envelopes, check results, manifests, incidents; and reading cases for finish."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import any_, bindparam, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.records import EnvelopeRecord, ReportRecords, columns
from app.domain.reports import StoredView
from app.models import (
    CheckResult,
    EvidenceManifest,
    Incident,
    Report,
    ReportEnvelope,
    ReportVerification,
)
from app.repositories import rows
from app.repositories.raw import driver_of


async def insert_cancelled_cases(
    session: AsyncSession,
    evaluation_id: uuid.UUID,
    check_id: str,
    dataset_version_id: uuid.UUID,
    repeats: int,
    scorer_version: str,
    scorer_digest: str,
    assurance: str,
) -> int:
    """Record `cancelled` for every pending (example, repeat) of one check.

    The leaf is the case record app.digest.merkle.case_record writes, spelled out in SQL: a
    cancelled case has no score, output, trace or evidence, so only strings vary, and
    PostgreSQL's to_json escapes strings as RFC 8785 does.
    """
    result = await session.execute(
        text(
            "INSERT INTO cases (evaluation_id, check_id, example_id, example_position, repeat,"
            " status, scorer_version, assurance, leaf)"
            " SELECT :evaluation_id, :check_id, e.example_id, e.position, r.repeat, 'cancelled',"
            " :scorer_version, :assurance, sha256('\\x00'::bytea || convert_to("
            """'{"assurance":' || to_json(CAST(:assurance AS text))"""
            """ || ',"evidence_refs":[],"example_id":' || to_json(e.example_id)"""
            """ || ',"output_digest"\\:null,"repeat":' || r.repeat"""
            """ || ',"score"\\:null,"scorer_digest":' || to_json(CAST(:scorer_digest AS text))"""
            """ || ',"status":"cancelled","trace_digest"\\:null}', 'UTF8'))"""
            " FROM (SELECT example_id, (row_number() OVER (ORDER BY example_id) - 1)::integer"
            " AS position FROM examples WHERE dataset_version_id = :dataset_version_id) e"
            " CROSS JOIN generate_series(0, :repeats - 1) AS r(repeat)"
            " ON CONFLICT (evaluation_id, check_id, example_id, repeat) DO NOTHING"
        ),
        {
            "evaluation_id": evaluation_id,
            "check_id": check_id,
            "dataset_version_id": dataset_version_id,
            "repeats": repeats,
            "scorer_version": scorer_version,
            "scorer_digest": scorer_digest,
            "assurance": assurance,
        },
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def lock_subject_suite(
    session: AsyncSession, project_id: uuid.UUID, subject_digest: str, suite_id: uuid.UUID
) -> None:
    """Serialize gate issuance per (project, subject digest, suite) until commit."""
    key = f"{project_id}/{suite_id}/{subject_digest}"
    await (await driver_of(session)).execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", key
    )


async def count_gate_reports(
    session: AsyncSession, project_id: uuid.UUID, subject_digest: str, suite_id: uuid.UUID
) -> int:
    """Gate reports already issued for (subject digest, suite), any version, any result."""
    count: int = await (await driver_of(session)).fetchval(
        "SELECT count(*) FROM reports WHERE project_id = $1 AND subject_digest = $2"
        " AND suite_id = $3 AND mode = 'gate'",
        project_id,
        subject_digest,
        suite_id,
    )
    return count


async def supersede_current(
    session: AsyncSession,
    project_id: uuid.UUID,
    subject_digest: str,
    suite_id: uuid.UUID,
    successor: uuid.UUID,
    at: datetime,
) -> list[uuid.UUID]:
    """Mark every current gate report of (subject, suite) superseded by `successor`."""
    found = await (await driver_of(session)).fetch(
        "UPDATE report_envelopes SET status = 'superseded', superseded_by = $4,"
        " superseded_at = $5, superseded_reason = 're_evaluation'"
        " WHERE project_id = $1 AND subject_digest = $2 AND suite_id = $3"
        " AND status = 'current' AND mode = 'gate' RETURNING report_id",
        project_id,
        subject_digest,
        suite_id,
        successor,
        at,
    )
    return [row[0] for row in found]


async def supersede_for_activation(
    session: AsyncSession, suite_id: uuid.UUID, replaced_version_id: uuid.UUID, at: datetime
) -> list[uuid.UUID]:
    """Supersede the still-valid current gate reports issued under the replaced version."""
    result = await session.execute(
        update(ReportEnvelope)
        .where(
            ReportEnvelope.suite_id == suite_id,
            ReportEnvelope.suite_version_id == replaced_version_id,
            ReportEnvelope.status == "current",
            ReportEnvelope.mode == "gate",
            ReportEnvelope.expires_at > at,
        )
        .values(status="superseded", superseded_at=at, superseded_reason="suite_version_activated")
        .returning(ReportEnvelope.report_id)
    )
    return sorted(result.scalars(), key=str)


async def insert_report(session: AsyncSession, records: ReportRecords) -> None:
    """Write a report with its check results and evidence manifests."""
    await rows.insert(session, Report, columns(records.report))
    await rows.insert_many(session, CheckResult, [columns(c) for c in records.checks])
    await rows.insert_many(session, EvidenceManifest, [columns(m) for m in records.manifests])


async def insert_envelope(session: AsyncSession, envelope: EnvelopeRecord) -> None:
    """Write a report's envelope (after older current reports were superseded)."""
    await rows.insert(session, ReportEnvelope, columns(envelope))


async def get_with_envelope(
    session: AsyncSession, project_id: uuid.UUID, report_id: uuid.UUID
) -> tuple[Report, ReportEnvelope] | None:
    """A report of the project with its envelope, as ORM rows: for what audits the stored
    columns (the integrity check, the bundle export). Every other read of a report goes
    through `repositories.reads`."""
    result = await session.execute(
        select(Report, ReportEnvelope)
        .join(ReportEnvelope, ReportEnvelope.report_id == Report.id)
        .where(Report.id == report_id, Report.project_id == project_id)
    )
    row = result.first()
    return None if row is None else (row[0], row[1])


def stored_view(report: Report, envelope: ReportEnvelope) -> StoredView:
    """A report's two audited rows as the view the read paths serve (the bundle export serves
    what it audited)."""
    return StoredView(
        id=report.id,
        digest=report.digest,
        body=report.body,
        status=envelope.status,
        superseded_by=envelope.superseded_by,
        superseded_at=envelope.superseded_at,
        superseded_reason=envelope.superseded_reason,
        expires_at=envelope.expires_at,
        has_open_incident=envelope.has_open_incident,
        log_index=envelope.log_index,
        issued_at=report.issued_at,
        result=report.result,
        subject_digest=report.subject_digest,
        mode=report.mode,
        valid_until=report.valid_until,
        project_id=report.project_id,
        evaluation_id=report.evaluation_id,
        suite_version_id=report.suite_version_id,
    )


async def check_rows(session: AsyncSession, report_id: uuid.UUID) -> list[CheckResult]:
    """The check results stored beside a report, in check order."""
    return (await check_rows_of(session, [report_id])).get(report_id, [])


async def check_rows_of(
    session: AsyncSession, report_ids: list[uuid.UUID]
) -> dict[uuid.UUID, list[CheckResult]]:
    """The check results stored beside each of several reports, in check order (one query)."""
    query = (
        select(CheckResult)
        .where(CheckResult.report_id == any_(bindparam("ids", type_=ARRAY(PG_UUID()))))
        .order_by(CheckResult.report_id, CheckResult.position)
    )
    found: dict[uuid.UUID, list[CheckResult]] = {}
    for row in (await session.execute(query, {"ids": report_ids})).scalars():
        found.setdefault(row.report_id, []).append(row)
    return found


async def open_incident(session: AsyncSession, values: dict[str, Any]) -> None:
    """Record an incident unless one is already open for that report."""
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    await session.execute(
        pg_insert(Incident)
        .values(**values)
        .on_conflict_do_nothing(
            index_elements=["report_id"], index_where=text("resolved_at IS NULL")
        )
    )


async def open_incident_detail(session: AsyncSession, report_id: uuid.UUID) -> str | None:
    """What the report's open incident found, or None when it has none."""
    value: str | None = await session.scalar(
        select(Incident.detail).where(
            Incident.report_id == report_id, Incident.resolved_at.is_(None)
        )
    )
    return value


async def incident_project(session: AsyncSession, incident_id: int) -> uuid.UUID | None:
    """The project an open incident belongs to (None: unknown, closed, or the log's own)."""
    value = await session.scalar(
        select(Incident.project_id).where(
            Incident.id == incident_id, Incident.resolved_at.is_(None)
        )
    )
    return value


async def resolve_incident(
    session: AsyncSession, incident_id: int, actor: str, reason: str
) -> datetime:
    """Close an incident through the owner's audited function (the only way the service's
    login may); when it was closed."""
    value: datetime = await session.scalar(
        text("SELECT evalbook_resolve_incident(:id, :actor, :reason)"),
        {"id": incident_id, "actor": actor, "reason": reason},
    )
    return value


async def open_incidents(session: AsyncSession, project_id: uuid.UUID | None) -> list[Incident]:
    """Open incidents, newest first (of one project, or all)."""
    query = select(Incident).where(Incident.resolved_at.is_(None))
    if project_id is not None:
        query = query.where(Incident.project_id == project_id)
    return list((await session.execute(query.order_by(Incident.id.desc()))).scalars())


async def count_open_incidents(session: AsyncSession) -> int:
    """Open incidents across projects (the Prometheus gauge)."""
    value = await session.scalar(
        select(func.count()).select_from(Incident).where(Incident.resolved_at.is_(None))
    )
    return int(value or 0)


async def superseded_by(
    session: AsyncSession, project_id: uuid.UUID, successor: uuid.UUID
) -> list[uuid.UUID]:
    """The reports this one superseded (the other direction of `superseded_by`)."""
    result = await session.execute(
        select(ReportEnvelope.report_id)
        .where(ReportEnvelope.project_id == project_id, ReportEnvelope.superseded_by == successor)
        .order_by(ReportEnvelope.superseded_at.desc())
    )
    return list(result.scalars())


SWEEP_LOCK = "evalbook:verification-sweep"


async def try_sweep_lock(session: AsyncSession) -> bool:
    """The sweep's transaction-level lock: one sweeper at a time across processes."""
    value = await session.scalar(
        text("SELECT pg_try_advisory_xact_lock(hashtextextended(:key, 0))"),
        {"key": SWEEP_LOCK},
    )
    return bool(value)


async def due_for_verification(
    session: AsyncSession, older_than: datetime, limit: int
) -> list[tuple[Report, ReportEnvelope]]:
    """Reports never verified or last verified before `older_than`, newest first."""
    query = (
        select(Report, ReportEnvelope)
        .join(ReportEnvelope, ReportEnvelope.report_id == Report.id)
        .where(
            ~select(ReportVerification.id)
            .where(
                ReportVerification.report_id == Report.id,
                ReportVerification.verified_at >= older_than,
            )
            .exists()
        )
        .order_by(Report.issued_at.desc(), Report.id.desc())
        .limit(limit)
    )
    return [(row[0], row[1]) for row in (await session.execute(query)).all()]


async def record_verifications(
    session: AsyncSession, outcomes: list[tuple[uuid.UUID, bool]], at: datetime
) -> None:
    """Append when reports were verified, and how it went (rows are never rewritten: the
    database dates each one itself)."""
    # In slices: a statement carries at most 32,767 parameters.
    for start in range(0, len(outcomes), 5_000):
        rows = [
            {"report_id": rid, "verified_at": at, "verified": ok}
            for rid, ok in outcomes[start : start + 5_000]
        ]
        await session.execute(insert(ReportVerification).values(rows))
