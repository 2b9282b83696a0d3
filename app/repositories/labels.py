"""Labels' rows (docs/judges.md): stored all or nothing, an identical re-send changing nothing;
read for a finish, and for the page of examples still to label."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from app.platform.db import ReadConnection, WriteConnection

# Counts what it stored: a batch stored whole (the common case) sends nothing back.
INSERT_SQL = """
WITH stored AS (
    INSERT INTO labels (evaluation_id, check_id, example_id, label, value, labeller, note,
                        assurance, token_id, leaf, example_position)
    SELECT $1, u.check_id, u.example_id, u.label, u.value, u.labeller, u.note, $2, $3, u.leaf,
           u.example_position
    FROM unnest($4::text[], $5::text[], $6::text[], $7::float8[], $8::text[], $9::text[],
                $10::bytea[], $11::int4[])
        AS u(check_id, example_id, label, value, labeller, note, leaf, example_position)
    ON CONFLICT (evaluation_id, check_id, example_id) DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM stored
"""
# A probe per re-sent label, as REQUESTED_SQL's joins are (stale statistics would otherwise
# nest a batch's keys against every label of the evaluation).
STORED_SQL = """
SELECT l.check_id, l.example_id, l.label, l.labeller, l.note, l.assurance
FROM unnest($2::text[], $3::text[]) AS u(check_id, example_id)
JOIN LATERAL (
    SELECT * FROM labels
    WHERE evaluation_id = $1 AND check_id = u.check_id AND example_id = u.example_id OFFSET 0
) l ON true
"""
FINISH_SQL = """
SELECT check_id, example_id, label, value, labeller, assurance, leaf, example_position
FROM labels WHERE evaluation_id = $1 ORDER BY check_id, example_id COLLATE "C"
"""
# Each join is a LATERAL probe by the whole key, kept from being flattened (OFFSET 0): right
# after a large evaluation's cases arrive, before autoanalyze, the planner believes an
# evaluation holds a row or two and would otherwise join a page to all of its cases (seconds
# at a million cases; a probe per example is a millisecond for the page).
REQUESTED_SQL = """
SELECT u.example_id, l.found IS NOT NULL AS labelled, c.status,
       CASE WHEN $5 THEN x.body END AS body,
       CASE WHEN $5 THEN coalesce(c.output, o.output) END AS output
FROM unnest($3::text[]) AS u(example_id)
LEFT JOIN LATERAL (
    SELECT body FROM examples
    WHERE dataset_version_id = $4 AND example_id = u.example_id OFFSET 0
) x ON true
LEFT JOIN LATERAL (
    SELECT status, output FROM cases
    WHERE evaluation_id = $1 AND check_id = $2 AND example_id = u.example_id AND repeat = 0
    OFFSET 0
) c ON true
LEFT JOIN LATERAL (
    SELECT output FROM case_outputs
    WHERE $5 AND evaluation_id = $1 AND check_id = $2 AND example_id = u.example_id
      AND repeat = 0
    OFFSET 0
) o ON true
LEFT JOIN LATERAL (
    SELECT true AS found FROM labels
    WHERE evaluation_id = $1 AND check_id = $2 AND example_id = u.example_id OFFSET 0
) l ON true
ORDER BY u.example_id COLLATE "C"
"""
LABELLED_SQL = """
SELECT check_id, count(*) FROM labels WHERE evaluation_id = $1 GROUP BY check_id
"""


@dataclass(frozen=True)
class LabelRows:
    """Labels to store, as aligned columns."""

    check_ids: list[str]
    example_ids: list[str]
    labels: list[str]
    values: list[float]
    labellers: list[str]
    notes: list[str | None]
    leaves: list[bytes]
    positions: list[int]


async def insert(
    writer: WriteConnection,
    evaluation_id: uuid.UUID,
    assurance: str,
    token_id: uuid.UUID,
    rows: LabelRows,
) -> int:
    """Store the labels not stored yet; how many were stored now."""
    inserted = await writer.fetchval(
        INSERT_SQL,
        evaluation_id,
        assurance,
        token_id,
        rows.check_ids,
        rows.example_ids,
        rows.labels,
        rows.values,
        rows.labellers,
        rows.notes,
        rows.leaves,
        rows.positions,
    )
    return int(inserted)


async def stored(
    reader: ReadConnection, evaluation_id: uuid.UUID, keys: list[tuple[str, str]]
) -> dict[tuple[str, str], Any]:
    """The stored labels of these (check, example) pairs."""
    rows = await reader.fetch(STORED_SQL, evaluation_id, [k[0] for k in keys], [k[1] for k in keys])
    return {(row["check_id"], row["example_id"]): row for row in rows}


async def of_evaluation(reader: ReadConnection, evaluation_id: uuid.UUID) -> list[Any]:
    """Every label of an evaluation, by check and example id (byte order)."""
    rows: list[Any] = await reader.fetch(FINISH_SQL, evaluation_id)
    return rows


async def requested(
    reader: ReadConnection,
    evaluation_id: uuid.UUID,
    check_id: str,
    example_ids: list[str],
    dataset_version_id: uuid.UUID,
    with_bodies: bool,
) -> list[Any]:
    """Sampled examples of a check with their label state, case status, input and output."""
    rows: list[Any] = await reader.fetch(
        REQUESTED_SQL, evaluation_id, check_id, example_ids, dataset_version_id, with_bodies
    )
    return rows


async def labelled_counts(reader: ReadConnection, evaluation_id: uuid.UUID) -> dict[str, int]:
    """How many labels each check of an evaluation holds."""
    return {
        row["check_id"]: row["count"] for row in await reader.fetch(LABELLED_SQL, evaluation_id)
    }


CHECK_LABELS_SQL = """
SELECT example_id, label, labeller, assurance, note FROM labels
WHERE evaluation_id = $1 AND check_id = $2 ORDER BY example_id COLLATE "C"
"""


async def of_check(reader: ReadConnection, evaluation_id: uuid.UUID, check_id: str) -> list[Any]:
    """One check's labels with their notes, in example id byte order (a bundle's lines)."""
    rows: list[Any] = await reader.fetch(CHECK_LABELS_SQL, evaluation_id, check_id)
    return rows
