"""Exporting a report as a reproducibility bundle, and reading bundles back (docs/bundles.md)."""

from __future__ import annotations

import base64
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app import __version__
from app.bundles.format import FORMAT, MEDIA_TYPE
from app.bundles.writing import line, raw
from app.digest.canonical import canonical_bytes, timestamp
from app.domain.errors import Forbidden, IntegrityFailure, NotFound
from app.domain.reports import StoredView
from app.domain.suites import scored_checks
from app.identity.auth import Principal
from app.models import Bundle, Report, ReportEnvelope
from app.platform.config import Settings
from app.platform.storage import ObjectNotFound, ObjectStore
from app.platform.storage.bundle_writer import BundleWriter
from app.platform.storage.spool import SpooledParts
from app.platform.storage.uploads import SpooledUpload, UploadJanitor
from app.repositories import bundles as repo
from app.repositories import definitions as definition_repo
from app.repositories import reports as report_repo
from app.repositories import signing as signing_repo
from app.repositories.raw import driver_of
from app.schemas.bundles import BundleList, BundleOut
from app.services import case_integrity, exports
from app.services import reports as report_service
from app.services import signing as signing_service
from app.services.bundle_lines import BundleLines, BundleSource, write_bundle
from app.services.bundle_log import bundle_log
from app.services.case_integrity import Finding
from app.services.incidents import IncidentRecorder
from app.services.kit.case_trees import CaseTreeCache
from app.services.kit.cursors import decode_cursor, split_page
from app.services.signing import Signer
from app.services.transparency import TransparencyLog

logger = logging.getLogger(__name__)


def bundle_out(bundle: Bundle) -> BundleOut:
    """The API form of a bundle record."""
    return BundleOut(
        bundle_id=str(bundle.id),
        report_id=str(bundle.report_id),
        digest=bundle.digest,
        size_bytes=bundle.size_bytes,
        object_key=bundle.object_key,
        media_type=bundle.media_type,
        created_at=timestamp(bundle.created_at),
        created_by=bundle.created_by,
        unavailable_count=bundle.unavailable_count,
        redacted_count=bundle.redacted_count,
    )


async def _source(
    session: AsyncSession,
    principal: Principal,
    report_id: uuid.UUID,
    settings: Settings,
    public_url: str,
    trees: CaseTreeCache,
    incidents: IncidentRecorder,
    signer: Signer,
    log: TransparencyLog | None = None,
) -> tuple[BundleSource, str, bytes, bytes, list[dict[str, Any]]]:
    """Everything the bundle rests on, plus the report and suite version lines."""
    report, envelope = await report_service.stored_rows(session, principal, report_id)
    await _refuse_unless_verified(session, report, envelope, incidents)
    view = report_repo.stored_view(report, envelope)
    evaluation = await repo.get_evaluation(session, report.evaluation_id)
    suite_version = await definition_repo.get_suite_version_by_id(session, report.suite_version_id)
    assert evaluation is not None and suite_version is not None
    body = orjson.loads(report.body)
    content = orjson.loads(suite_version.content)
    names = sorted({check["scorer"]["name"] for check in scored_checks(content)})
    scorers = {
        (s.name, s.version): s
        for s in await definition_repo.scorers_named(session, principal.project_id, names)
    }
    datasets = {}
    for ref in body["dataset_refs"]:
        dataset = await definition_repo.get_dataset(
            session, principal.project_id, ref["name"], ref["version"]
        )
        assert dataset is not None and dataset.digest == ref["digest"]
        datasets[ref["digest"]] = dataset
    source = BundleSource(
        connection=await driver_of(session),
        report_id=report.id,
        evaluation_id=evaluation.id,
        baseline_evaluation_id=evaluation.baseline_evaluation_id,
        body=body,
        suite_content=content,
        scorers=scorers,
        datasets=datasets,
        can_read_bodies=principal.has("dataset.read_body"),
        case_limit=settings.bundle_case_limit,
        trees=trees,
    )
    report_fields, keys = await _report_fields(session, view, public_url, log, signer)
    report_line = line(report_fields)
    suite_line = line(
        {
            "kind": "suite_version",
            "digest": suite_version.digest,
            "content": raw(suite_version.content),
        }
    )
    return source, report.digest, report_line, suite_line, keys


async def _refuse_unless_verified(
    session: AsyncSession, report: Report, envelope: ReportEnvelope, incidents: IncidentRecorder
) -> None:
    """Never export what the service's own checks (and so the verifiers) would refuse: a
    report with an open incident, or one whose body, columns, attestation or envelope no
    longer verify (the incident opened, 409). Its cases are proved as they are written."""
    detail = await report_repo.open_incident_detail(session, report.id)
    if detail is not None:
        raise IntegrityFailure(
            f"the report has an open incident, so no bundle is exported: {detail}"
        )
    found, _, _, _ = await report_service.integrity_findings(
        session, report, envelope, await report_repo.check_rows(session, report.id), cases=False
    )
    await _refuse_findings(report.project_id, report.id, report.digest, found, incidents)


async def _refuse_findings(
    project_id: uuid.UUID,
    report_id: uuid.UUID,
    digest: str,
    found: list[Finding],
    incidents: IncidentRecorder,
) -> None:
    """Open the report's incident and answer 409 when anything was found."""
    if not found:
        return
    await incidents.open(project_id, report_id, digest, found[0].part, "; ".join(map(str, found)))
    raise IntegrityFailure(
        "the report no longer verifies, so no bundle is exported: " + "; ".join(map(str, found))
    )


async def _unwritten_tree_findings(session: AsyncSession, lines: BundleLines) -> list[Finding]:
    """The bound cases trees the bundle's lines did not pass through (none in a body the
    service issued), recomputed from their rows as the sweep does."""
    found: list[Finding] = []
    for tree in lines.untraversed():
        found += await case_integrity.tree_findings(
            session, tree, lines.versions_of(tree.scorer_name)
        )
    return found


async def _report_fields(
    session: AsyncSession,
    report: StoredView,
    public_url: str,
    log: TransparencyLog | None,
    signer: Signer,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The report line's fields (body, envelope, attestation, test result, supersessions,
    log) and the public keys that signed them, for the header."""
    report_fields: dict[str, Any] = {
        "kind": "report",
        "digest": report.digest,
        "body": raw(report.body),
        "envelope": report_service.envelope(report, public_url, datetime.now(UTC)),
    }
    keys: list[dict[str, Any]] = []
    attestation = await signing_repo.attestation(session, report.id)
    if attestation is not None:
        report_fields["attestation"] = raw(canonical_bytes(orjson.loads(attestation.envelope)))
        key = await signing_repo.get_key(session, attestation.keyid)
        assert key is not None, f"key {attestation.keyid} signed report {report.id}"
        keys.append(signing_service.key_entry(key))
        signed = exports.test_result_envelope(report, public_url, signer, attestation.keyid)
        report_fields["test_result"] = raw(signed)
    statements = await _supersession_statements(session, report.project_id, report.id)
    if statements:
        report_fields["supersessions"] = [
            raw(canonical_bytes(orjson.loads(e))) for e, _, _ in statements
        ]
        for _, keyid, _ in statements:
            if all(k["keyid"] != keyid for k in keys):
                signing_key = await signing_repo.get_key(session, keyid)
                assert signing_key is not None, f"key {keyid} signed a supersession"
                keys.append(signing_service.key_entry(signing_key))
    if log is not None:
        superseded = [report_id for _, _, report_id in statements]
        logged = await bundle_log(await driver_of(session), log, report.id, superseded)
        if logged is not None:
            report_fields["log"] = logged
    return report_fields, keys


def _header_line(
    principal: Principal,
    report_id: uuid.UUID,
    report_digest: str,
    created_at: datetime,
    source: BundleSource,
    keys: list[dict[str, Any]],
) -> bytes:
    """The bundle's first line: format, report, exporter, producer, baseline, keys."""
    return line(
        {
            "kind": "header",
            "format": FORMAT,
            "report_id": str(report_id),
            "report_digest": report_digest,
            "created_at": timestamp(created_at),
            "exporter": {
                "token_name": principal.token_name,
                "permissions": sorted(principal.permissions),
            },
            "producer": {"service_version": __version__, "numpy_version": np.__version__},
            "baseline_evaluation_id": None
            if source.baseline_evaluation_id is None
            else str(source.baseline_evaluation_id),
            "keys": keys,
        }
    )


def _bundle_row(
    bundle_id: uuid.UUID,
    principal: Principal,
    report_id: uuid.UUID,
    key: str,
    writer: BundleWriter,
    lines: BundleLines,
    created_at: datetime,
) -> dict[str, Any]:
    """The `bundles` row of a bundle written whole."""
    return {
        "id": bundle_id,
        "project_id": principal.project_id,
        "report_id": report_id,
        "digest": writer.digest,
        "size_bytes": writer.stored_bytes,
        "object_key": key,
        "media_type": MEDIA_TYPE,
        "created_by": principal.token_name,
        "created_by_token_id": principal.token_id,
        "unavailable_count": lines.unavailable.count,
        "redacted_count": lines.redacted.count,
        "holds_bodies": lines.holds_bodies,
        "created_at": created_at,
    }


async def _supersession_statements(
    session: AsyncSession, project_id: uuid.UUID, report_id: uuid.UUID
) -> list[tuple[bytes, str, uuid.UUID]]:
    """Every signed supersession statement naming the report (its own, then those of the
    reports it superseded): (envelope bytes, signing keyid, the superseded report)."""
    found: list[tuple[bytes, str, uuid.UUID]] = []
    own = await signing_repo.supersession_attestation(session, report_id)
    if own is not None:
        found.append((own.envelope, own.keyid, report_id))
    for earlier in await report_repo.superseded_by(session, project_id, report_id):
        theirs = await signing_repo.supersession_attestation(session, earlier)
        if theirs is not None:
            found.append((theirs.envelope, theirs.keyid, earlier))
    return found


async def export(
    session: AsyncSession,
    principal: Principal,
    report_id: uuid.UUID,
    *,
    store: ObjectStore,
    janitor: UploadJanitor,
    settings: Settings,
    public_url: str,
    trees: CaseTreeCache,
    incidents: IncidentRecorder,
    signer: Signer,
    log: TransparencyLog | None = None,
) -> BundleOut:
    """Build a report's bundle, send it to the store, then record it; any failure leaves
    nothing. A report that no longer verifies is refused (409) and its incident opened.
    Built from the database into a spool first; the read transaction then ends, so that the
    bytes travel to the store (under the store's deadlines and `bundle_upload_seconds` in
    all) while the request holds no pooled connection; the record is written in a second,
    short transaction (decision 0019)."""
    source, report_digest, report_line, suite_line, keys = await _source(
        session, principal, report_id, settings, public_url, trees, incidents, signer, log
    )
    bundle_id = uuid.uuid4()
    key = (
        f"bundles/{principal.organization_slug}/{principal.project_slug}/"
        f"{report_id}/{bundle_id}.jsonl.gz"
    )
    created_at = datetime.now(UTC)
    header = _header_line(principal, report_id, report_digest, created_at, source, keys)
    started = time.perf_counter()
    spool = SpooledParts()
    # The parts travel while the rest is built; the store keeps nothing until `finish`.
    upload = SpooledUpload(spool, await store.begin_upload(key, MEDIA_TYPE), janitor)
    try:
        writer = BundleWriter(spool, settings.bundle_part_bytes, settings.bundle_gzip_level)
        lines = BundleLines(source, writer)
        await write_bundle(writer, lines, (header, report_line, suite_line))
        found = lines.findings + await _unwritten_tree_findings(session, lines)
        await _refuse_findings(principal.project_id, report_id, report_digest, found, incidents)
        # Reports are immutable: nothing read above can change before the record is written.
        await session.commit()
        await upload.finish(settings.bundle_upload_seconds)
    except BaseException:
        await upload.abandon()
        raise
    finally:
        spool.close()
    record = _bundle_row(bundle_id, principal, report_id, key, writer, lines, created_at)
    try:
        await repo.insert_bundle(session, record)
        await session.flush()
    except BaseException:
        await store.delete(key)
        raise
    seconds = time.perf_counter() - started
    logger.info("bundle %s of report %s: %s in %.2f s", bundle_id, report_id, writer, seconds)
    bundle = await repo.get_bundle(session, principal.project_id, bundle_id)
    assert bundle is not None
    return bundle_out(bundle)


async def get(session: AsyncSession, principal: Principal, bundle_id: uuid.UUID) -> Bundle:
    """A bundle record of the caller's project, or 404."""
    bundle = await repo.get_bundle(session, principal.project_id, bundle_id)
    if bundle is None:
        raise NotFound("no such bundle")
    return bundle


async def read(session: AsyncSession, principal: Principal, bundle_id: uuid.UUID) -> BundleOut:
    """A bundle record as the API shows it, or 404."""
    return bundle_out(await get(session, principal, bundle_id))


async def list_bundles(
    session: AsyncSession,
    principal: Principal,
    *,
    report_id: uuid.UUID | None,
    limit: int,
    cursor: str | None,
) -> BundleList:
    """Bundle records newest first, optionally of one report."""
    rows = await repo.list_page(
        session,
        principal.project_id,
        report_id=report_id,
        after=None if cursor is None else decode_cursor(cursor),
        limit=limit,
    )
    page, next_cursor = split_page(rows, limit, lambda b: (b.created_at, b.id))
    return BundleList(bundles=[bundle_out(b) for b in page], next_cursor=next_cursor)


async def content(
    session: AsyncSession, principal: Principal, bundle_id: uuid.UUID, store: ObjectStore
) -> tuple[Bundle, AsyncIterator[bytes]]:
    """A bundle's record and its bytes; bodies and outputs need dataset.read_body."""
    bundle = await get(session, principal, bundle_id)
    if bundle.holds_bodies and not principal.has("dataset.read_body"):
        raise Forbidden("this bundle holds example bodies or outputs: it needs dataset.read_body")
    stream = store.stream(bundle.object_key)
    return bundle, stream


@dataclass(frozen=True)
class Download:
    """A bundle's bytes as a download, with the headers that describe them."""

    chunks: AsyncIterator[bytes]
    media_type: str
    headers: dict[str, str]


async def download(
    session: AsyncSession, principal: Principal, bundle_id: uuid.UUID, store: ObjectStore
) -> Download:
    """A bundle's bytes (bodies inside need dataset.read_body). The first chunk is read before
    answering, so a missing object or a store outage is an error response, not a cut stream."""
    bundle, chunks = await content(session, principal, bundle_id, store)
    try:
        first = await anext(chunks, b"")
    except ObjectNotFound:
        raise NotFound("the bundle's object is missing from the store") from None

    async def stream() -> AsyncIterator[bytes]:
        yield first
        async for chunk in chunks:
            yield chunk

    digest = base64.b64encode(bytes.fromhex(bundle.digest.removeprefix("sha256:"))).decode()
    return Download(
        stream(),
        bundle.media_type,
        {
            "Content-Length": str(bundle.size_bytes),
            "Content-Disposition": f'attachment; filename="{bundle.id}.jsonl.gz"',
            "Repr-Digest": f"sha-256=:{digest}:",
        },
    )
