"""What verification reads beyond the report row: case rows as columns, scorer digests, and
when the service first signed."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import TypeVar

from sqlalchemy import RowMapping, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import ReportAttestation, ScorerVersion, SigningKey, SupersessionAttestation

RowT = TypeVar("RowT", ReportAttestation, SupersessionAttestation)

# A check's cases in case order with every column a case record is made of, and the stored
# output (inline, or in `case_outputs`); never the stored leaf.
CASES_SQL = """
SELECT c.example_id, c.repeat, c.status, c.score, c.output_digest, c.trace_digest,
       c.evidence_refs, c.assurance, c.scorer_version, c.measures,
       coalesce(c.output, o.output) AS output
FROM cases c LEFT JOIN case_outputs o ON o.evaluation_id = c.evaluation_id
    AND o.check_id = c.check_id AND o.example_id = c.example_id AND o.repeat = c.repeat
WHERE c.evaluation_id = CAST(:evaluation_id AS uuid) AND c.check_id = :check_id
ORDER BY c.example_id, c.repeat
"""


async def case_rows(
    session: AsyncSession, evaluation_id: str, check_id: str
) -> Sequence[RowMapping]:
    """A small check's case rows (CASES_SQL), all at once."""
    parameters = {"evaluation_id": evaluation_id, "check_id": check_id}
    return (await session.execute(text(CASES_SQL), parameters)).mappings().all()


# A check's labels in the labels tree's order with the columns a label leaf is made of; never
# the stored leaf.
LABELS_SQL = """
SELECT example_id, label, labeller, assurance FROM labels
WHERE evaluation_id = CAST(:evaluation_id AS uuid) AND check_id = :check_id
ORDER BY example_id COLLATE "C"
"""


async def label_rows(
    session: AsyncSession, evaluation_id: str, check_id: str
) -> Sequence[RowMapping]:
    """A check's stored labels (LABELS_SQL), in example id byte order."""
    parameters = {"evaluation_id": evaluation_id, "check_id": check_id}
    return (await session.execute(text(LABELS_SQL), parameters)).mappings().all()


async def case_row_batches(
    session: AsyncSession, evaluation_id: str, check_id: str, size: int
) -> AsyncIterator[Sequence[RowMapping]]:
    """A check's case rows (CASES_SQL), streamed in batches of `size`."""
    parameters = {"evaluation_id": evaluation_id, "check_id": check_id}
    result = await session.stream(text(CASES_SQL), parameters)
    async for batch in result.mappings().partitions(size):
        yield batch


async def read_only(session: AsyncSession) -> None:
    """Make the session's transaction read-only (a verifier that reads has nothing to write)."""
    await session.execute(text("SET TRANSACTION READ ONLY"))


async def statement_timeout(session: AsyncSession) -> str:
    """The connection's statement timeout, as PostgreSQL writes it (`60s`)."""
    return str(await session.scalar(text("SELECT current_setting('statement_timeout')")))


async def keep_alive(session: AsyncSession) -> None:
    """One statement, so that a transaction waiting on work elsewhere is not idle."""
    await session.execute(text("SELECT 1"))


async def database_url(session: AsyncSession) -> str:
    """The address (password included) the session's engine connects to."""
    connection = await session.connection()
    return connection.engine.url.render_as_string(hide_password=False)


async def first_key_created(session: AsyncSession) -> datetime | None:
    """When the service's first signing key was made: every report issued since is signed."""
    value: datetime | None = await session.scalar(select(func.min(SigningKey.created_at)))
    return value


async def scorer_digests(session: AsyncSession, project_id: uuid.UUID, name: str) -> dict[str, str]:
    """Version -> digest of a project's scorer."""
    result = await session.execute(
        select(ScorerVersion.version, ScorerVersion.digest).where(
            ScorerVersion.project_id == project_id, ScorerVersion.name == name
        )
    )
    return {version: digest for version, digest in result.all()}


async def attestations_of(
    session: AsyncSession, report_ids: list[uuid.UUID]
) -> dict[uuid.UUID, ReportAttestation]:
    """The attestations of these reports, by report."""
    return await _by_report(session, ReportAttestation, report_ids)


async def supersessions_of(
    session: AsyncSession, report_ids: list[uuid.UUID]
) -> dict[uuid.UUID, SupersessionAttestation]:
    """The signed supersession statements of these reports (as superseded), by report."""
    return await _by_report(session, SupersessionAttestation, report_ids)


async def _by_report(
    session: AsyncSession, model: type[RowT], report_ids: list[uuid.UUID]
) -> dict[uuid.UUID, RowT]:
    if not report_ids:
        return {}
    rows = await session.execute(select(model).where(model.report_id.in_(report_ids)))
    return {row.report_id: row for row in rows.scalars()}
