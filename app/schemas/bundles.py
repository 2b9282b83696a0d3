"""Bundle requests and records (docs/bundles.md)."""

from __future__ import annotations

from pydantic import BaseModel

from app.schemas.base import StrictModel
from app.schemas.common import Uuid


class BundleIn(StrictModel):
    """POST /evaluations/api/reports/bundle."""

    report_id: Uuid


class BundleOut(BaseModel):
    """A bundle record."""

    bundle_id: str
    report_id: str
    digest: str
    size_bytes: int
    object_key: str
    media_type: str
    created_at: str
    created_by: str
    unavailable_count: int
    redacted_count: int


class BundleList(BaseModel):
    """A page of bundle records, newest first."""

    bundles: list[BundleOut]
    next_cursor: str | None
