"""A report in the ecosystem's formats (docs/exports.md): the signed in-toto test-result
attestation, Hugging Face's model-index and a CycloneDX ML-BOM, each a view of the stored,
signed report that links back to it."""

from __future__ import annotations

import uuid

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal
from app.domain.reports import StoredView
from app.errors import NotFound
from app.formats.test_result import test_result_statement
from app.repositories import signing as signing_repo
from app.services import reports
from app.services.signing import Signer
from app.signing import envelope


async def signed_test_result(
    session: AsyncSession, report: StoredView, public_url: str, signer: Signer
) -> bytes | None:
    """The report's test-result statement in a DSSE envelope signed by the key that signed the
    report (Ed25519 signs deterministically: the same bytes every time); None for a report
    issued before reports were signed."""
    attestation = await signing_repo.attestation(session, report.id)
    if attestation is None:
        return None
    body = orjson.loads(report.body)
    statement = test_result_statement(body, public_url.rstrip("/"), report.digest)
    return envelope(statement, signer.private(attestation.keyid))


async def test_result_attestation(
    session: AsyncSession,
    principal: Principal,
    report_id: uuid.UUID,
    public_url: str,
    signer: Signer,
) -> bytes:
    """`?predicate=test-result`: the signed test-result statement, or 404."""
    report = await reports.get(session, principal, report_id)
    signed = await signed_test_result(session, report, public_url, signer)
    if signed is None:
        raise NotFound("this report was issued before reports were signed")
    return signed
