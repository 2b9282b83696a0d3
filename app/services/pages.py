"""What the Reports pages read: lists, one report with its neighbours, one subject."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import NotFound
from app.domain.reports import ListedView, ReportFilters, subject_name
from app.identity.auth import Principal
from app.models import Bundle, Case
from app.platform.db import ReadConnection
from app.repositories import bundles as bundle_repo
from app.repositories import cases as case_repo
from app.repositories import reads
from app.repositories import reports as repo
from app.repositories import signing as signing_repo
from app.services import report_lists
from app.services import reports as report_service

PAGE_SIZE = 25


@dataclass
class ListedReport:
    """A row of the reports table."""

    report_id: str
    result: str
    subject_digest: str
    suite: str
    issued_at: datetime
    valid_until: datetime
    assurance: str
    status: str
    expired: bool
    mode: str
    subject_name: str | None = None


def listed(report: ListedView, now: datetime) -> ListedReport:
    """One row from a stored report (the body is parsed for suite and assurance)."""
    body = orjson.loads(report.body)
    return ListedReport(
        report_id=str(report.id),
        result=report.result,
        subject_digest=report.subject_digest,
        suite=f"{body['suite_ref']['name']} v{body['suite_ref']['version']}",
        issued_at=report.issued_at,
        valid_until=report.valid_until,
        assurance=body.get("assurance", ""),
        status=report.status,
        expired=report.expires_at <= now,
        mode=report.mode,
        subject_name=subject_name(body.get("subject")),
    )


async def report_list(
    reader: ReadConnection, principal: Principal, filters: ReportFilters, cursor: str | None
) -> tuple[list[ListedReport], str | None]:
    """A page of the project's reports, newest first, and the cursor of the next page."""
    page, following = await report_lists.report_page(
        reader, principal, filters, limit=PAGE_SIZE, cursor=cursor
    )
    now = datetime.now(UTC)
    return [listed(view, now) for view in page], following


@dataclass
class ReportPage:
    """One report (body bytes and served envelope) with the reports it superseded and its
    bundles."""

    report_id: str
    digest: str
    body: bytes
    envelope: dict[str, Any]
    supersedes: list[str]
    bundles: list[Bundle]
    signer: Signature | None = None


@dataclass
class Signature:
    """Who signed a report: the key, and what this service says of it."""

    keyid: str
    status: str


async def report_page(
    session: AsyncSession, principal: Principal, report_id: uuid.UUID, public_base_url: str
) -> ReportPage:
    """A report of the caller's project (404 otherwise)."""
    report = await report_service.get(session, principal, report_id)
    served = report_service.envelope(report, public_base_url, datetime.now(UTC))
    supersedes = await repo.superseded_by(session, principal.project_id, report.id)
    bundles: list[Bundle] = []
    if principal.has("report.export"):
        bundles = await bundle_repo.list_page(
            session, principal.project_id, report_id=report.id, after=None, limit=5
        )
    attestation = await signing_repo.attestation(session, report.id)
    signer = None
    if attestation is not None:
        key = await signing_repo.get_key(session, attestation.keyid)
        signer = Signature(attestation.keyid, key.status if key is not None else "unknown")
    return ReportPage(
        report_id=str(report.id),
        digest=report.digest,
        body=report.body,
        envelope=served,
        supersedes=[str(r) for r in supersedes],
        bundles=bundles[:5],
        signer=signer,
    )


async def subject_page(
    reader: ReadConnection, principal: Principal, digest: str
) -> tuple[list[ListedReport], list[ListedReport]]:
    """What forSubject says (current, unexpired or not), and the superseded history."""
    now = datetime.now(UTC)
    current = await reads.report_list(
        reader,
        principal.project_id,
        ReportFilters(subject_digest=digest, status="current", mode="gate"),
        None,
        100,
    )
    history = await reads.report_list(
        reader,
        principal.project_id,
        ReportFilters(subject_digest=digest, status="superseded"),
        None,
        100,
    )
    return [listed(v, now) for v in current], [listed(v, now) for v in history]


@dataclass
class ExampleCasesPage:
    """One example's cases in one check of a report."""

    report_id: str
    check: dict[str, Any]
    example_id: str
    cases: list[Case]


async def example_cases_page(
    session: AsyncSession,
    principal: Principal,
    report_id: uuid.UUID,
    check_id: str,
    example_id: str,
) -> ExampleCasesPage:
    """The cases behind one example of a report's check (404 for an unknown check)."""
    report = await report_service.get(session, principal, report_id)
    body = orjson.loads(report.body)
    check = next((c for c in body.get("checks", []) if c["check_id"] == check_id), None)
    if check is None:
        raise NotFound(f"the report has no check {check_id}")
    cases = await case_repo.example_cases(session, report.evaluation_id, check_id, example_id)
    if not cases:
        raise NotFound(f"no case of example {example_id} in check {check_id}")
    return ExampleCasesPage(str(report.id), check, example_id, cases)
