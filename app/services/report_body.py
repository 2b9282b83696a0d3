"""A report's body and the rows that store it, built from the engine's result (no I/O)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from app.digest.canonical import timestamp
from app.domain.records import (
    CheckRecord,
    EnvelopeRecord,
    ManifestRecord,
    ReportRecord,
    ReportRecords,
)
from app.domain.results import ReportResult
from app.identity.auth import Principal
from app.models import Evaluation, SuiteVersion

SCHEMA_VERSION = "1.0"
PRODUCER = "svc_evalbook"


@dataclass(frozen=True, slots=True)
class Issuing:
    """The new report's id and times."""

    report_id: uuid.UUID
    issued_at: datetime
    valid_until: datetime

    @classmethod
    def now(cls, suite: dict[str, Any]) -> Issuing:
        """A new report id, issued now and valid for the suite's validity_hours."""
        issued_at = datetime.now(UTC)
        valid_until = issued_at + timedelta(hours=float(suite["validity_hours"]))
        return cls(uuid.uuid4(), issued_at, valid_until)


def report_body(
    principal: Principal,
    evaluation: Evaluation,
    suite_version: SuiteVersion,
    suite_name: str,
    dataset_refs: list[dict[str, str]],
    results: ReportResult,
    issued: Issuing,
) -> dict[str, Any]:
    """The report body (docs/report-body.md): who, what was evaluated, against which suite and
    datasets, the engine's result, and when."""
    return {
        "schema_version": SCHEMA_VERSION,
        "producer": PRODUCER,
        "organization": {"id": str(principal.organization_id), "slug": principal.organization_slug},
        "project": {"id": str(principal.project_id), "slug": principal.project_slug},
        "report_id": str(issued.report_id),
        "evaluation_id": str(evaluation.id),
        "subject": orjson.loads(evaluation.subject),
        "suite_ref": {
            "id": str(suite_version.id),
            "name": suite_name,
            "version": suite_version.version,
            "digest": suite_version.digest,
        },
        "dataset_refs": dataset_refs,
        "mode": evaluation.mode,
        "execution_mode": evaluation.execution_mode,
        **results.as_body(),
        "issued_at": timestamp(issued.issued_at),
        "valid_until": timestamp(issued.valid_until),
    }


@dataclass(frozen=True, slots=True)
class Sealed:
    """A body's canonical bytes and their sha256 digest."""

    body: bytes
    digest: str


def report_records(
    results: ReportResult,
    issued: Issuing,
    evaluation: Evaluation,
    suite_version: SuiteVersion,
    sealed: Sealed,
    case_counts: dict[str, int],
    stored_manifests: dict[str, bytes],
) -> ReportRecords:
    """The report's row, its checks' rows and its manifests' rows."""
    report_id = issued.report_id
    evidence = {check.check_id: check.evidence_refs for check in results.checks}
    return ReportRecords(
        report=ReportRecord(
            id=report_id,
            project_id=evaluation.project_id,
            evaluation_id=evaluation.id,
            suite_id=suite_version.suite_id,
            suite_version_id=suite_version.id,
            subject_digest=evaluation.subject_digest,
            mode=evaluation.mode,
            result=results.result,
            body=sealed.body,
            digest=sealed.digest,
            issued_at=issued.issued_at,
            valid_until=issued.valid_until,
        ),
        checks=tuple(
            CheckRecord(
                report_id=report_id,
                check_id=check.check_id,
                position=position,
                required=check.required,
                status=check.status,
                result=check.result,
                score=check.score,
                case_count=case_counts.get(check.check_id, 0),
            )
            for position, check in enumerate(results.checks)
        ),
        manifests=tuple(
            ManifestRecord(report_id, check_id, digests, evidence[check_id][0])
            for check_id, digests in stored_manifests.items()
        ),
    )


def envelope_record(
    issued: Issuing, evaluation: Evaluation, suite_version: SuiteVersion
) -> EnvelopeRecord:
    """The new report's envelope: current, until it expires or is superseded."""
    return EnvelopeRecord(
        report_id=issued.report_id,
        project_id=evaluation.project_id,
        suite_id=suite_version.suite_id,
        suite_version_id=suite_version.id,
        subject_digest=evaluation.subject_digest,
        mode=evaluation.mode,
        status="current",
        expires_at=issued.valid_until,
        issued_at=issued.issued_at,
    )
