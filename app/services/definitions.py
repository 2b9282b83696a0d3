"""Registering and reading scorer, dataset and suite versions; freezing suites."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.digest.canonical import canonical_and_digest, canonical_bytes, digest_of
from app.domain.errors import Conflict, NotFound, validation_error
from app.identity.auth import Principal
from app.models import DatasetVersion, ScorerVersion, Suite, SuiteVersion
from app.repositories import definitions as repo
from app.repositories import reports as report_repo
from app.schemas.definitions import (
    ActivationOut,
    DatasetList,
    DatasetVersionIn,
    DatasetVersionListed,
    DatasetVersionOut,
    ExampleOut,
    ScorerList,
    ScorerVersionIn,
    ScorerVersionOut,
    SuiteList,
    SuiteListed,
    SuiteOut,
    SuiteVersionIn,
    SuiteVersionOut,
    SuiteVersionSummary,
)
from app.services import signing, transparency
from app.services.freezing import freeze_suite_content
from app.services.kit.cursors import decode_cursor, split_page
from app.services.notifications import announce_superseded


def scorer_out(scorer: ScorerVersion) -> ScorerVersionOut:
    """The API representation of a scorer version."""
    score_range = None if scorer.score_lo is None else [scorer.score_lo, scorer.score_hi or 0.0]
    return ScorerVersionOut(
        name=scorer.name,
        version=scorer.version,
        digest=scorer.digest,
        definition=orjson.loads(scorer.definition),
        score_range=score_range,
        retired=scorer.retired_at is not None,
        created_at=scorer.created_at,
    )


async def put_scorer(
    session: AsyncSession, principal: Principal, name: str, version: str, body: ScorerVersionIn
) -> tuple[ScorerVersionOut, bool]:
    """Register a scorer version; (answer, created). Same content again is fine, other is 409."""
    definition_bytes = canonical_bytes(body.definition)
    digest = digest_of({"name": name, "version": version, "definition": body.definition})
    lo, hi = body.score_range if body.score_range is not None else (None, None)
    created = await repo.insert_scorer_if_absent(
        session,
        {
            "id": uuid.uuid4(),
            "project_id": principal.project_id,
            "name": name,
            "version": version,
            "definition": definition_bytes.decode(),
            "score_lo": lo,
            "score_hi": hi,
            "digest": digest,
        },
    )
    scorer = await repo.get_scorer(session, principal.project_id, name, version)
    assert scorer is not None
    if not created and (scorer.digest != digest or (scorer.score_lo, scorer.score_hi) != (lo, hi)):
        raise Conflict(f"scorer {name} version {version} exists with other content")
    return scorer_out(scorer), created


async def get_scorer(
    session: AsyncSession, principal: Principal, name: str, version: str
) -> ScorerVersion:
    """A scorer version of the caller's project, or 404."""
    scorer = await repo.get_scorer(session, principal.project_id, name, version)
    if scorer is None:
        raise NotFound(f"no scorer {name} version {version}")
    return scorer


async def read_scorer(
    session: AsyncSession, principal: Principal, name: str, version: str
) -> ScorerVersionOut:
    """A scorer version as the API shows it, or 404."""
    return scorer_out(await get_scorer(session, principal, name, version))


async def retire_scorer(
    session: AsyncSession, principal: Principal, name: str, version: str
) -> ScorerVersionOut:
    """Retire a scorer version: kept for reports, unavailable for new suites and bundles."""
    scorer = await get_scorer(session, principal, name, version)
    await repo.retire_scorer(session, scorer.id)
    await session.refresh(scorer)
    return scorer_out(scorer)


def dataset_digest(name: str, version: str, examples: list[dict[str, Any]]) -> str:
    """Digest of a dataset version from (id, body digest, tags), sorted by id."""
    ordered = sorted(examples, key=lambda example: example["id"])
    return digest_of(
        {
            "name": name,
            "version": version,
            "examples": [
                {"id": e["id"], "body_digest": e["body_digest"], "tags": e["tags"]} for e in ordered
            ],
        }
    )


async def put_dataset(
    session: AsyncSession, principal: Principal, name: str, version: str, body: DatasetVersionIn
) -> tuple[DatasetVersionOut, bool]:
    """Register a dataset version; duplicate example ids are refused with their index."""
    seen: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    dataset_id = uuid.uuid4()
    for index, example in enumerate(body.examples):
        if example.id in seen:
            raise validation_error(
                ("body", "examples", index, "id"),
                f"duplicate example id {example.id!r} (first at {seen[example.id]})",
                index=index,
            )
        seen[example.id] = index
        body_bytes, body_digest = canonical_and_digest(example.body)
        rows.append(
            {
                "dataset_version_id": dataset_id,
                "example_id": example.id,
                "body": body_bytes.decode(),
                "body_digest": body_digest,
                "tags": list(example.tags),
            }
        )
    digest = dataset_digest(
        name,
        version,
        [{"id": r["example_id"], "body_digest": r["body_digest"], "tags": r["tags"]} for r in rows],
    )
    created = await repo.insert_dataset_if_absent(
        session,
        {
            "id": dataset_id,
            "project_id": principal.project_id,
            "name": name,
            "version": version,
            "digest": digest,
            "example_count": len(rows),
        },
        rows,
    )
    dataset = await repo.get_dataset(session, principal.project_id, name, version)
    assert dataset is not None
    if not created and dataset.digest != digest:
        raise Conflict(f"dataset {name} version {version} exists with other content")
    return dataset_out(dataset), created


def dataset_out(
    dataset: DatasetVersion, examples: list[ExampleOut] | None = None
) -> DatasetVersionOut:
    """The API representation of a dataset version."""
    return DatasetVersionOut(
        name=dataset.name,
        version=dataset.version,
        digest=dataset.digest,
        example_count=dataset.example_count,
        created_at=dataset.created_at,
        examples=examples,
    )


async def get_dataset(
    session: AsyncSession, principal: Principal, name: str, version: str
) -> DatasetVersionOut:
    """A dataset version with its examples; bodies only with dataset.read_body."""
    dataset = await repo.get_dataset(session, principal.project_id, name, version)
    if dataset is None:
        raise NotFound(f"no dataset {name} version {version}")
    with_bodies = principal.has("dataset.read_body")
    examples = []
    for example in await repo.list_examples(session, dataset.id):
        fields: dict[str, Any] = {
            "id": example.example_id,
            "tags": list(example.tags),
            "body_digest": example.body_digest,
            "body_available": example.body is not None,
        }
        if with_bodies and example.body is not None:
            fields["body"] = orjson.loads(example.body)
        examples.append(ExampleOut(**fields))
    return dataset_out(dataset, examples)


def suite_version_out(suite: Suite, suite_version: SuiteVersion) -> SuiteVersionOut:
    """The API representation of a suite version."""
    return SuiteVersionOut(
        name=suite.name,
        version=suite_version.version,
        digest=suite_version.digest,
        status="active" if suite.active_version_id == suite_version.id else "inactive",
        content=orjson.loads(suite_version.content),
        created_at=suite_version.created_at,
    )


async def put_suite_version(
    session: AsyncSession, principal: Principal, name: str, version: str, body: SuiteVersionIn
) -> tuple[SuiteVersionOut, bool]:
    """Freeze and store a suite version; a suite's first version becomes its active one."""
    content = await freeze_suite_content(session, principal, name, version, body)
    content_bytes, digest = canonical_and_digest(content)
    suite = await repo.get_or_create_suite(session, principal.project_id, name)
    suite = await repo.lock_suite(session, suite.id)
    version_id = uuid.uuid4()
    created = await repo.insert_suite_version_if_absent(
        session,
        {
            "id": version_id,
            "suite_id": suite.id,
            "project_id": principal.project_id,
            "version": version,
            "content": content_bytes.decode(),
            "digest": digest,
        },
    )
    suite_version = await repo.get_suite_version(session, suite.id, version)
    assert suite_version is not None
    if not created and suite_version.digest != digest:
        raise Conflict(f"suite {name} version {version} exists with other content")
    if created and suite.active_version_id is None:
        await repo.set_active_version(session, suite.id, suite_version.id)
        suite.active_version_id = suite_version.id
    return suite_version_out(suite, suite_version), created


async def find_suite_version(
    session: AsyncSession, principal: Principal, name: str, version: str
) -> tuple[Suite, SuiteVersion]:
    """A suite and one of its versions, or 404."""
    suite = await repo.get_suite(session, principal.project_id, name)
    suite_version = (
        None if suite is None else await repo.get_suite_version(session, suite.id, version)
    )
    if suite is None or suite_version is None:
        raise NotFound(f"no suite {name} version {version}")
    return suite, suite_version


async def read_suite_version(
    session: AsyncSession, principal: Principal, name: str, version: str
) -> SuiteVersionOut:
    """A frozen suite version as the API shows it, or 404."""
    return suite_version_out(*await find_suite_version(session, principal, name, version))


async def get_suite(session: AsyncSession, principal: Principal, name: str) -> SuiteOut:
    """A suite with its versions."""
    suite = await repo.get_suite(session, principal.project_id, name)
    if suite is None:
        raise NotFound(f"no suite {name}")
    versions = await repo.list_suite_versions(session, suite.id)
    active = next((v.version for v in versions if v.id == suite.active_version_id), None)
    return SuiteOut(
        name=suite.name,
        active_version=active,
        versions=[
            SuiteVersionSummary(
                version=v.version,
                digest=v.digest,
                status="active" if v.id == suite.active_version_id else "inactive",
                created_at=v.created_at,
            )
            for v in versions
        ],
    )


async def activate_suite_version(
    session: AsyncSession, principal: Principal, name: str, version: str, signer: signing.Signer
) -> ActivationOut:
    """Make a version active; supersede the still-valid gate reports of the one it replaces."""
    suite, suite_version = await find_suite_version(session, principal, name, version)
    suite = await repo.lock_suite(session, suite.id)
    superseded: list[uuid.UUID] = []
    if suite.active_version_id != suite_version.id:
        replaced = suite.active_version_id
        await repo.set_active_version(session, suite.id, suite_version.id)
        if replaced is not None:
            key = await signing.hold_active_key(session)
            at = datetime.now(UTC)
            superseded = await report_repo.supersede_for_activation(session, suite.id, replaced, at)
            statements = await signing.attest_supersessions(
                session, signer, key, superseded, None, "suite_version_activated", at
            )
            await transparency.append(session, "supersession", [e for e, _ in statements])
            await announce_superseded(session, principal.project_id, superseded, None)
    return ActivationOut(
        name=suite.name,
        version=suite_version.version,
        superseded_report_ids=[str(report_id) for report_id in superseded],
    )


async def list_scorers(
    session: AsyncSession, principal: Principal, name: str | None, limit: int, cursor: str | None
) -> ScorerList:
    """The project's scorer versions, newest first, optionally of one name."""
    after = None if cursor is None else decode_cursor(cursor)
    rows = await repo.list_versions(
        session, ScorerVersion, principal.project_id, name, after, limit
    )
    page, following = split_page(rows, limit, lambda s: (s.created_at, s.id))
    return ScorerList(scorers=[scorer_out(s) for s in page], next_cursor=following)


async def list_datasets(
    session: AsyncSession, principal: Principal, name: str | None, limit: int, cursor: str | None
) -> DatasetList:
    """The project's dataset versions, newest first, optionally of one name."""
    after = None if cursor is None else decode_cursor(cursor)
    rows = await repo.list_versions(
        session, DatasetVersion, principal.project_id, name, after, limit
    )
    page, following = split_page(rows, limit, lambda d: (d.created_at, d.id))
    listed = [DatasetVersionListed.model_validate(d) for d in page]
    return DatasetList(datasets=listed, next_cursor=following)


async def list_suites(
    session: AsyncSession, principal: Principal, limit: int, cursor: str | None
) -> SuiteList:
    """The project's suites, newest first, with their active versions."""
    after = None if cursor is None else decode_cursor(cursor)
    rows = await repo.list_suites(session, principal.project_id, after, limit)
    page, following = split_page(rows, limit, lambda row: (row[0].created_at, row[0].id))
    return SuiteList(
        suites=[
            SuiteListed(name=suite.name, active_version=active, created_at=suite.created_at)
            for suite, active in page
        ],
        next_cursor=following,
    )
