"""What a report is stored as: its row, its checks' rows, its manifests' rows and its
envelope, typed; the repositories write them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any


def columns(record: object) -> dict[str, Any]:
    """A record's fields by name (shallow: the values are already column values)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ReportRecord:
    """A report's row: its ids, the canonical body and its digest, the result and times."""

    id: uuid.UUID
    project_id: uuid.UUID
    evaluation_id: uuid.UUID
    suite_id: uuid.UUID
    suite_version_id: uuid.UUID
    subject_digest: str
    mode: str
    result: str
    body: bytes
    digest: str
    issued_at: datetime
    valid_until: datetime


@dataclass(frozen=True, slots=True)
class CheckRecord:
    """A check result stored beside its report (for lists and drill-downs without the body)."""

    report_id: uuid.UUID
    check_id: str
    position: int
    required: bool
    status: str
    result: str
    score: float | None
    case_count: int


@dataclass(frozen=True, slots=True)
class ManifestRecord:
    """A check's evidence manifest: its entries' digests (32 bytes each) and its digest."""

    report_id: uuid.UUID
    check_id: str
    digests: bytes
    digest: str


@dataclass(frozen=True, slots=True)
class EnvelopeRecord:
    """A report's mutable envelope as it is first written: current until it expires."""

    report_id: uuid.UUID
    project_id: uuid.UUID
    suite_id: uuid.UUID
    suite_version_id: uuid.UUID
    subject_digest: str
    mode: str
    status: str
    expires_at: datetime
    issued_at: datetime


@dataclass(frozen=True, slots=True)
class ReportRecords:
    """A new report's rows: the report, its checks, its manifests."""

    report: ReportRecord
    checks: tuple[CheckRecord, ...]
    manifests: tuple[ManifestRecord, ...]
