"""A report in the ecosystem's formats (docs/exports.md): the signed in-toto test-result
attestation, Hugging Face's model-index and a CycloneDX ML-BOM, each a view of the stored,
signed report that links back to it."""

from __future__ import annotations

import uuid

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app import __version__
from app.digest.signing import envelope
from app.domain.errors import NotFound
from app.domain.reports import StoredView
from app.formats.cyclonedx import bom
from app.formats.model_index import model_index_yaml
from app.formats.test_result import test_result_statement
from app.identity.auth import Principal
from app.repositories import definitions
from app.repositories import signing as signing_repo
from app.services import reports
from app.services.signing import UNSIGNED, Signer


def test_result_envelope(report: StoredView, public_url: str, signer: Signer, keyid: str) -> bytes:
    """The report's test-result statement in a DSSE envelope signed by `keyid`, the key that
    signed the report (Ed25519 signs deterministically: the same bytes every time)."""
    body = orjson.loads(report.body)
    statement = test_result_statement(body, public_url.rstrip("/"), report.digest)
    return envelope(statement, signer.private(keyid))


async def test_result_attestation(
    session: AsyncSession,
    principal: Principal,
    report_id: uuid.UUID,
    public_url: str,
    signer: Signer,
) -> bytes:
    """`?predicate=test-result`: the signed test-result statement, or 404."""
    report = await reports.get(session, principal, report_id)
    attestation = await signing_repo.attestation(session, report.id)
    if attestation is None:
        raise NotFound(UNSIGNED)
    return test_result_envelope(report, public_url, signer, attestation.keyid)


async def model_index(
    session: AsyncSession, principal: Principal, report_id: uuid.UUID, public_url: str
) -> bytes:
    """The report as a model card's `model-index` (YAML)."""
    report = await reports.get(session, principal, report_id)
    suite_version = await definitions.get_suite_version_by_id(session, report.suite_version_id)
    assert suite_version is not None, f"report {report_id} names its suite version"
    content = orjson.loads(suite_version.content)
    return model_index_yaml(orjson.loads(report.body), content, public_url.rstrip("/"))


async def cyclonedx(
    session: AsyncSession, principal: Principal, report_id: uuid.UUID, public_url: str
) -> bytes:
    """The report as a CycloneDX 1.6 ML-BOM (JSON)."""
    report = await reports.get(session, principal, report_id)
    document = bom(orjson.loads(report.body), report.digest, public_url.rstrip("/"), __version__)
    return orjson.dumps(document)
