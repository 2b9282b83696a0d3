"""Reports (append-only), their envelopes, check results, manifests and incidents."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    Text,
    column,
    exists,
    select,
    table,
    text,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, column_property, mapped_column

from app.models.base import Base, created_at, project_ref
from app.models.definitions import C_TEXT

# The transparency log's entries, only as far as a report's envelope reads them (the log itself
# is written by the database's own functions, never through the ORM).
_LOG_ENTRIES = table("log_entries", column("idx"), column("kind"), column("report_id"))


class Report(Base):
    """An issued report: canonical body bytes and their digest, never changed (triggers)."""

    __tablename__ = "reports"
    # Newest first (keyset on issued_at, id): in a project, a subject, a suite.
    __table_args__ = (
        Index("ix_reports_project_issued", "project_id", "issued_at", "id"),
        Index(
            "ix_reports_project_subject_issued", "project_id", "subject_digest", "issued_at", "id"
        ),
        Index("ix_reports_project_suite_issued", "project_id", "suite_id", "issued_at", "id"),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    project_id: Mapped[uuid.UUID] = project_ref()
    evaluation_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("evaluations.id"), nullable=False, unique=True
    )
    suite_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("suites.id"), nullable=False
    )
    suite_version_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("suite_versions.id"), nullable=False
    )
    subject_digest: Mapped[str] = mapped_column(Text, nullable=False)
    mode: Mapped[str] = mapped_column(Text, nullable=False)
    result: Mapped[str] = mapped_column(Text, nullable=False)
    body: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    digest: Mapped[str] = mapped_column(Text, nullable=False)
    issued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    valid_until: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class Incident(Base):
    """A report whose stored bytes no longer verify."""

    __tablename__ = "incidents"
    __table_args__ = (
        Index(
            "uq_incidents_open_report",
            "report_id",
            unique=True,
            postgresql_where=text("resolved_at IS NULL"),
        ),
        Index(
            "uq_incidents_open_log",
            "kind",
            unique=True,
            postgresql_where=text("report_id IS NULL AND resolved_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    # Both null for an incident of the transparency log itself.
    project_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), nullable=True)
    report_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("reports.id"), nullable=True
    )
    kind: Mapped[str] = mapped_column(Text, nullable=False)
    stored_digest: Mapped[str] = mapped_column(Text, nullable=False)
    computed_digest: Mapped[str] = mapped_column(Text, nullable=False)
    detail: Mapped[str] = mapped_column(Text, nullable=False)
    detected_at: Mapped[datetime] = created_at()
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ReportEnvelope(Base):
    """The mutable metadata beside a report: current or superseded."""

    __tablename__ = "report_envelopes"
    __table_args__ = (
        CheckConstraint("status IN ('current', 'superseded')", name="status"),
        CheckConstraint(
            "superseded_reason IS NULL OR superseded_reason IN "
            "('re_evaluation', 'suite_version_activated')",
            name="superseded_reason",
        ),
        # At most one current gate report per (project, subject digest, suite).
        Index(
            "uq_report_envelopes_current_gate",
            "project_id",
            "subject_digest",
            "suite_id",
            unique=True,
            postgresql_where=text("status = 'current' AND mode = 'gate'"),
        ),
        Index(
            "ix_report_envelopes_project_status_issued",
            "project_id",
            "status",
            "issued_at",
            "report_id",
        ),
        Index("ix_report_envelopes_project_issued", "project_id", "issued_at", "report_id"),
        Index(
            "ix_report_envelopes_project_suite_status_issued",
            "project_id",
            "suite_id",
            "status",
            "issued_at",
            "report_id",
        ),
    )

    report_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("reports.id"), primary_key=True
    )
    project_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    suite_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    suite_version_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    subject_digest: Mapped[str] = mapped_column(Text, nullable=False)
    mode: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False)
    superseded_by: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("reports.id"), nullable=True
    )
    superseded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    superseded_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    # The report's own issued_at, so the lists filtered by status run on envelope indexes.
    issued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    # An open incident (the report no longer verifies) flags it wherever it is served.
    has_open_incident: Mapped[bool] = column_property(
        exists().where(Incident.report_id == report_id, Incident.resolved_at.is_(None))
    )
    # The index of the report's entry in the transparency log (None before the log).
    log_index: Mapped[int | None] = column_property(
        select(_LOG_ENTRIES.c.idx)
        .where(_LOG_ENTRIES.c.kind == "report", _LOG_ENTRIES.c.report_id == report_id)
        .scalar_subquery()
    )


class CheckResult(Base):
    """One check of a report, for queries (the body holds the full result)."""

    __tablename__ = "check_results"

    report_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("reports.id"), primary_key=True
    )
    check_id: Mapped[str] = mapped_column(C_TEXT, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    required: Mapped[bool] = mapped_column(Boolean, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False)
    result: Mapped[str] = mapped_column(Text, nullable=False)
    score: Mapped[float | None] = mapped_column(Double, nullable=True)
    # How many case rows the check had at issue (a bundle plans its case limit from it);
    # NULL for reports issued before the column existed.
    case_count: Mapped[int | None] = mapped_column(Integer, nullable=True)


class EvidenceManifest(Base):
    """A check's evidence manifest when it has over 20 entries: its entries' digests, 32 bytes
    each (app/digest/manifest_digests.py rebuilds the canonical JSON array)."""

    __tablename__ = "evidence_manifests"

    report_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("reports.id"), primary_key=True
    )
    check_id: Mapped[str] = mapped_column(C_TEXT, primary_key=True)
    digests: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    digest: Mapped[str] = mapped_column(Text, nullable=False)


class ReportVerification(Base):
    """When a report was last verified, by whom it does not matter: the sweep's bookkeeping."""

    __tablename__ = "report_verifications"
    __table_args__ = (Index("ix_report_verifications_report", "report_id", "verified_at"),)

    # Append-only: one row per verification (the newest says how it went).
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    report_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("reports.id"), nullable=False
    )
    verified_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    verified: Mapped[bool] = mapped_column(Boolean, nullable=False)
