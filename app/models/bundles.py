"""Reproducibility bundle records: listed only once their object is complete in the store."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, created_at, project_ref


class Bundle(Base):
    """One exported bundle of a report (docs/bundles.md)."""

    __tablename__ = "bundles"
    __table_args__ = (
        Index("ix_bundles_project_created", "project_id", "created_at", "id"),
        Index("ix_bundles_report", "report_id"),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    project_id: Mapped[uuid.UUID] = project_ref()
    report_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("reports.id"), nullable=False
    )
    digest: Mapped[str] = mapped_column(Text, nullable=False)
    size_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    object_key: Mapped[str] = mapped_column(Text, nullable=False, unique=True)
    media_type: Mapped[str] = mapped_column(Text, nullable=False)
    created_by: Mapped[str] = mapped_column(Text, nullable=False)
    created_by_token_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("api_tokens.id"), nullable=False
    )
    unavailable_count: Mapped[int] = mapped_column(Integer, nullable=False)
    redacted_count: Mapped[int] = mapped_column(Integer, nullable=False)
    # True when any example body or case output is in the bundle: downloading it then needs
    # dataset.read_body as well.
    holds_bodies: Mapped[bool] = mapped_column(Boolean, nullable=False)
    created_at: Mapped[datetime] = created_at()
