"""Scorer, dataset and suite versions: immutable once written."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    DateTime,
    Double,
    ForeignKey,
    Integer,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

from app.models.base import Base, created_at, project_ref, uuid_pk

C_TEXT = Text(collation="C")


class NamedVersion:
    """What scorer and dataset versions share: an id, the project, a name and a version, the
    last three unique together."""

    @declared_attr.directive
    def __table_args__(cls) -> tuple[UniqueConstraint]:
        return (UniqueConstraint("project_id", "name", "version"),)

    id: Mapped[uuid.UUID] = uuid_pk()
    project_id: Mapped[uuid.UUID] = project_ref()
    name: Mapped[str] = mapped_column(C_TEXT, nullable=False)
    version: Mapped[str] = mapped_column(C_TEXT, nullable=False)


class ScorerVersion(NamedVersion, Base):
    """A pinned scorer definition; `digest` covers {name, version, definition}."""

    __tablename__ = "scorer_versions"

    definition: Mapped[str] = mapped_column(Text, nullable=False)
    score_lo: Mapped[float | None] = mapped_column(Double, nullable=True)
    score_hi: Mapped[float | None] = mapped_column(Double, nullable=True)
    digest: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = created_at()
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class DatasetVersion(NamedVersion, Base):
    """A frozen list of examples; its digest is provable without the bodies."""

    __tablename__ = "dataset_versions"

    digest: Mapped[str] = mapped_column(Text, nullable=False)
    example_count: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[datetime] = created_at()


class Example(Base):
    """One example of a dataset version; `body` is canonical JSON, removable by retention."""

    __tablename__ = "examples"

    dataset_version_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("dataset_versions.id"), primary_key=True
    )
    example_id: Mapped[str] = mapped_column(C_TEXT, primary_key=True)
    body: Mapped[str | None] = mapped_column(Text, nullable=True)
    body_digest: Mapped[str] = mapped_column(Text, nullable=False)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    created_at: Mapped[datetime] = created_at()
    body_removed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Suite(Base):
    """A named set of checks; one of its versions is active at a time."""

    __tablename__ = "suites"
    __table_args__ = (UniqueConstraint("project_id", "name"),)

    id: Mapped[uuid.UUID] = uuid_pk()
    project_id: Mapped[uuid.UUID] = project_ref()
    name: Mapped[str] = mapped_column(C_TEXT, nullable=False)
    active_version_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True),
        ForeignKey("suite_versions.id", use_alter=True, name="fk_suites_active_version"),
        nullable=True,
    )
    created_at: Mapped[datetime] = created_at()


class SuiteVersion(Base):
    """A frozen, digested suite version; `content` is its canonical JSON."""

    __tablename__ = "suite_versions"
    __table_args__ = (UniqueConstraint("suite_id", "version"),)

    id: Mapped[uuid.UUID] = uuid_pk()
    suite_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("suites.id"), nullable=False
    )
    project_id: Mapped[uuid.UUID] = project_ref()
    version: Mapped[str] = mapped_column(C_TEXT, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    digest: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = created_at()
    activated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
