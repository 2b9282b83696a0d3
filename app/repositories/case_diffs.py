"""Reading two reports' cases for a diff (raw driver connections): one check's narrow columns as
a binary COPY, the changed cases of a check joined across two evaluations, and a check's cases
a page at a time."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from app.domain.vocabulary import CASE_STATUSES
from app.platform.db import ReadConnection
from app.platform.memory import ReceiveBuffer
from app.repositories.case_columns import KEY_FIELDS, CopyFormatError, copy_rows

_STATUS_CODE = " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(CASE_STATUSES))

NARROW_SQL = f"""
SELECT example_position, repeat, coalesce(score, 'NaN'::float8),
       (CASE status {_STATUS_CODE} END)::int2
FROM cases WHERE evaluation_id = $1 AND check_id = $2
"""
NARROW_ROW = np.dtype(
    [
        *KEY_FIELDS,
        ("status_length", ">i4"),
        ("status", ">i2"),
    ]
)

_RECORD = (
    "{0}.status, {0}.score, {0}.output_digest, {0}.trace_digest, {0}.evidence_refs, "
    "{0}.assurance, {0}.scorer_version"
)
CHANGED_SQL = f"""
SELECT coalesce(a.example_id, b.example_id) AS example_id,
       coalesce(a.repeat, b.repeat) AS repeat,
       {_RECORD.format("b")}, {_RECORD.format("a")}
FROM (SELECT * FROM cases WHERE evaluation_id = $1 AND check_id = $3) a
FULL JOIN (SELECT * FROM cases WHERE evaluation_id = $2 AND check_id = $3) b
  ON a.example_id = b.example_id AND a.repeat = b.repeat
WHERE a.status IS DISTINCT FROM b.status OR a.score IS DISTINCT FROM b.score
ORDER BY 1, 2
"""
RECORD_FIELDS = (
    "status",
    "score",
    "output_digest",
    "trace_digest",
    "evidence_refs",
    "assurance",
    "scorer_version",
)

CASES_PAGE_SQL = """
SELECT c.example_id, c.repeat, c.status, c.score, c.output_digest, c.trace_digest,
       c.evidence_refs, c.assurance, c.scorer_version,
       CASE WHEN $7 THEN coalesce(c.output, o.output) END AS output, c.output_key
FROM cases c LEFT JOIN case_outputs o ON $7 AND o.evaluation_id = c.evaluation_id
    AND o.check_id = c.check_id AND o.example_id = c.example_id AND o.repeat = c.repeat
WHERE c.evaluation_id = $1 AND c.check_id = $2
  AND ($3::text IS NULL OR (c.example_id, c.repeat) > ($3, $8::int))
  AND ($4::text IS NULL OR c.status = $4)
  AND ($5::text[] IS NULL OR c.example_id = ANY($5))
  AND ($9::text IS NULL OR EXISTS (
      SELECT 1 FROM examples e WHERE e.dataset_version_id = $10
        AND e.example_id = c.example_id AND $9 = ANY(e.tags)))
ORDER BY c.example_id, c.repeat
LIMIT $6
"""
FLAKY_SQL = """
SELECT example_id FROM cases WHERE evaluation_id = $1 AND check_id = $2
GROUP BY example_id HAVING bool_or(status = 'pass') AND bool_or(status = 'fail')
ORDER BY example_id LIMIT $3
"""

EXAMPLE_CASES_SQL = """
SELECT c.check_id, c.repeat, c.status, c.score, c.output_digest, c.trace_digest,
       c.evidence_refs, c.assurance, c.scorer_version, c.measures,
       CASE WHEN $3 THEN coalesce(c.output, o.output) END AS output, c.output_key
FROM cases c LEFT JOIN case_outputs o ON $3 AND o.evaluation_id = c.evaluation_id
    AND o.check_id = c.check_id AND o.example_id = c.example_id AND o.repeat = c.repeat
WHERE c.evaluation_id = $1 AND c.example_id = $2
ORDER BY c.check_id, c.repeat
"""

EXAMPLE_BODY_SQL = """
SELECT body, body_digest, tags, body_removed_at FROM examples
WHERE dataset_version_id = $1 AND example_id = $2
"""


async def narrow_columns(
    connection: ReadConnection, evaluation_id: uuid.UUID, check_id: str
) -> np.ndarray:
    """One check's cases as (position, repeat, score, status code) rows, any order."""
    data = ReceiveBuffer()

    async def take(chunk: bytes) -> None:
        data.extend(chunk)

    await connection.copy_from_query(
        NARROW_SQL, evaluation_id, check_id, output=take, format="binary"
    )
    return decode_narrow(data.view())


def decode_narrow(data: bytes | memoryview) -> np.ndarray:
    """The rows of a binary COPY stream of NARROW_SQL (a view, not a copy)."""
    rows: np.ndarray = copy_rows(data, NARROW_ROW)
    if rows.size and not (rows["fields"] == 4).all():
        raise CopyFormatError("unexpected field count")
    return rows


async def changed_cases(
    connection: ReadConnection,
    after: uuid.UUID,
    before: uuid.UUID,
    check_id: str,
    batch: int = 5000,
) -> AsyncIterator[list[Any]]:
    """The cases of a check whose status or score differs between two evaluations (or that
    only one has), in (example id, repeat) order, a batch at a time; inside a transaction."""
    cursor = connection.cursor(CHANGED_SQL, after, before, check_id, prefetch=batch)
    rows: list[Any] = []
    async for row in cursor:
        rows.append(row)
        if len(rows) >= batch:
            yield rows
            rows = []
    if rows:
        yield rows


async def cases_page(
    connection: ReadConnection,
    evaluation_id: uuid.UUID,
    check_id: str,
    *,
    after: tuple[str, int] | None,
    status: str | None,
    example_ids: list[str] | None,
    tag: str | None,
    dataset_version_id: uuid.UUID,
    limit: int,
    with_output: bool,
) -> list[Any]:
    """A page of a check's cases in (example id, repeat) order, after a case, filtered."""
    rows: list[Any] = await connection.fetch(
        CASES_PAGE_SQL,
        evaluation_id,
        check_id,
        None if after is None else after[0],
        status,
        example_ids,
        limit,
        with_output,
        None if after is None else after[1],
        tag,
        dataset_version_id,
    )
    return rows


async def flaky_examples(
    connection: ReadConnection, evaluation_id: uuid.UUID, check_id: str, limit: int = 10_000
) -> list[str]:
    """Examples of a check with both a passed and a failed repeat, in id order."""
    return [r[0] for r in await connection.fetch(FLAKY_SQL, evaluation_id, check_id, limit)]


async def example_cases(
    connection: ReadConnection, evaluation_id: uuid.UUID, example_id: str, with_output: bool
) -> list[Any]:
    """Every case of one example in an evaluation, by check and repeat."""
    rows: list[Any] = await connection.fetch(
        EXAMPLE_CASES_SQL, evaluation_id, example_id, with_output
    )
    return rows


async def example_body(
    connection: ReadConnection, dataset_version_id: uuid.UUID, example_id: str
) -> Any:
    """An example of a dataset version (its body, digest and tags), or None."""
    return await connection.fetchrow(EXAMPLE_BODY_SQL, dataset_version_id, example_id)
