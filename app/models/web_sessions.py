"""Browser sessions of the Reports pages: a cookie standing for one API token."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, LargeBinary, Text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, created_at, uuid_pk


class WebSession(Base):
    """A signed-in browser: the cookie's secret is stored hashed; CSRF token in clear."""

    __tablename__ = "web_sessions"

    id: Mapped[uuid.UUID] = uuid_pk()
    secret_hash: Mapped[bytes] = mapped_column(LargeBinary, nullable=False, unique=True)
    token_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("api_tokens.id"), nullable=False, index=True
    )
    csrf_token: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = created_at()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
