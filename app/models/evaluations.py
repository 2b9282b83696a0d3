"""Evaluations and their cases."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    Double,
    ForeignKey,
    Integer,
    LargeBinary,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.orm import Mapped, mapped_column

# The vocabularies live with the engine (which may import no SQLAlchemy); tables check them.
from app.aggregation.inputs import ASSURANCE_LEVELS, CASE_STATUSES
from app.models.base import Base, created_at, uuid_pk
from app.models.definitions import C_TEXT


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Evaluation(Base):
    """One run of a suite version against one subject."""

    __tablename__ = "evaluations"
    __table_args__ = (
        UniqueConstraint("project_id", "idempotency_key"),
        CheckConstraint(_in("status", ("running", "finished", "cancelled")), name="status"),
        CheckConstraint(_in("mode", ("gate", "experiment", "exploratory")), name="mode"),
        CheckConstraint(
            _in("execution_mode", ("platform", "external", "local")), name="execution_mode"
        ),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    project_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("projects.id"), nullable=False, index=True
    )
    suite_version_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("suite_versions.id"), nullable=False
    )
    subject: Mapped[str] = mapped_column(Text, nullable=False)
    subject_digest: Mapped[str] = mapped_column(Text, nullable=False, index=True)
    mode: Mapped[str] = mapped_column(Text, nullable=False)
    execution_mode: Mapped[str] = mapped_column(Text, nullable=False)
    baseline_evaluation_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("evaluations.id"), nullable=True
    )
    status: Mapped[str] = mapped_column(Text, nullable=False, default="running")
    idempotency_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    request_digest: Mapped[str] = mapped_column(Text, nullable=False)
    created_by_token_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("api_tokens.id"), nullable=False
    )
    created_at: Mapped[datetime] = created_at()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Case(Base):
    """One scored attempt (check, example, repeat); written by COPY, never by the ORM."""

    __tablename__ = "cases"
    __table_args__ = (
        CheckConstraint(_in("status", CASE_STATUSES), name="status"),
        CheckConstraint(_in("assurance", ASSURANCE_LEVELS), name="assurance"),
        CheckConstraint("repeat >= 0", name="repeat"),
        CheckConstraint("octet_length(leaf) = 32", name="leaf"),
        CheckConstraint("example_position >= 0", name="example_position"),
        # Partitioned by hash of the evaluation (migration 0013).
        {"postgresql_partition_by": "HASH (evaluation_id)"},
    )

    # No foreign key to evaluations: a per-row trigger would cost a third of COPY's speed, and
    # ingestion only writes cases of an evaluation it holds locked (evaluations are never
    # deleted).
    evaluation_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    check_id: Mapped[str] = mapped_column(C_TEXT, primary_key=True)
    example_id: Mapped[str] = mapped_column(C_TEXT, primary_key=True)
    # The example's position in its dataset version (example id byte order): finish reads it.
    example_position: Mapped[int] = mapped_column(Integer, nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(Text, nullable=False)
    score: Mapped[float | None] = mapped_column(Double, nullable=True)
    # An inline output of up to INLINE_OUTPUT_BYTES; longer ones are in `case_outputs`.
    output: Mapped[str | None] = mapped_column(Text, nullable=True)
    output_digest: Mapped[str | None] = mapped_column(Text, nullable=True)
    output_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    evidence_refs: Mapped[list[str] | None] = mapped_column(ARRAY(Text), nullable=True)
    trace_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    trace_digest: Mapped[str | None] = mapped_column(Text, nullable=True)
    scorer_version: Mapped[str] = mapped_column(C_TEXT, nullable=False)
    assurance: Mapped[str] = mapped_column(Text, nullable=False)
    # SHA-256(0x00 || case record): the case's leaf in its check's cases tree (app.digest.merkle).
    leaf: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    # The case's measures as the canonical JSON its leaf commits to (None: it carries none).
    measures: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = created_at()
    output_removed_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )


class CaseOutput(Base):
    """A case's inline output longer than INLINE_OUTPUT_BYTES, apart from the case so that
    scanning cases reads narrow rows (partitioned like `cases`); retention deletes it and marks
    the case."""

    __tablename__ = "case_outputs"
    __table_args__ = ({"postgresql_partition_by": "HASH (evaluation_id)"},)

    evaluation_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    check_id: Mapped[str] = mapped_column(C_TEXT, primary_key=True)
    example_id: Mapped[str] = mapped_column(C_TEXT, primary_key=True)
    repeat: Mapped[int] = mapped_column(Integer, primary_key=True)
    output: Mapped[str] = mapped_column(Text, nullable=False)
