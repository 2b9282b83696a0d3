"""Signing keys (public halves; which one is active) and report attestations (append-only)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, DateTime, ForeignKey, Index, LargeBinary, Text, text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, created_at


class SigningKey(Base):
    """An Ed25519 public key the service signs with (active) or signed with (retired)."""

    __tablename__ = "signing_keys"
    __table_args__ = (
        CheckConstraint("status IN ('active', 'retired')", name="ck_signing_keys_status"),
        CheckConstraint("length(public_key) = 32", name="ck_signing_keys_length"),
        Index(
            "ux_signing_keys_one_active",
            text("(true)"),
            unique=True,
            postgresql_where=text("status = 'active'"),
        ),
    )

    keyid: Mapped[str] = mapped_column(Text, primary_key=True)
    public_key: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = created_at()
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class _Attestation:
    """A DSSE envelope about one report, signed with one key."""

    report_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("reports.id"), primary_key=True
    )
    keyid: Mapped[str] = mapped_column(Text, ForeignKey("signing_keys.keyid"), nullable=False)
    envelope: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    digest: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = created_at()


class ReportAttestation(_Attestation, Base):
    """The DSSE envelope signed when a report was issued, in the same transaction."""

    __tablename__ = "report_attestations"


class SupersessionAttestation(_Attestation, Base):
    """The DSSE envelope signed when a report was superseded, in the same transaction."""

    __tablename__ = "supersession_attestations"
