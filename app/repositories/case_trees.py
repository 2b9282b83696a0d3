"""Reading a check's leaves and one case for proofs (raw driver connection, read pool)."""

from __future__ import annotations

import uuid
from typing import Any

from app.platform.db import ReadConnection

TREE_SQL = """
SELECT array_agg(example_id ORDER BY example_id, repeat) AS example_ids,
       array_agg(repeat ORDER BY example_id, repeat) AS repeats,
       string_agg(leaf, ''::bytea ORDER BY example_id, repeat) AS leaves
FROM cases WHERE evaluation_id = $1 AND check_id = $2
"""
CASE_SQL = """
SELECT c.status, c.score, coalesce(c.output, o.output) AS output, c.output_digest,
       c.output_key, c.evidence_refs, c.trace_id, c.trace_digest, c.scorer_version,
       c.assurance, c.leaf, c.measures
FROM cases c LEFT JOIN case_outputs o ON o.evaluation_id = c.evaluation_id
    AND o.check_id = c.check_id AND o.example_id = c.example_id AND o.repeat = c.repeat
WHERE c.evaluation_id = $1 AND c.check_id = $2 AND c.example_id = $3 AND c.repeat = $4
"""
SCORER_DIGEST_SQL = """
SELECT digest FROM scorer_versions WHERE project_id = $1 AND name = $2 AND version = $3
"""


async def tree_rows(
    reader: ReadConnection, evaluation_id: uuid.UUID, check_id: str
) -> tuple[list[str], list[int], bytes]:
    """A check's cases in case order: example ids, repeats, and the leaf hashes joined."""
    row = await reader.fetchrow(TREE_SQL, evaluation_id, check_id)
    assert row is not None, "an aggregate over no rows still answers one row"
    return list(row["example_ids"] or ()), list(row["repeats"] or ()), bytes(row["leaves"] or b"")


async def case_row(
    reader: ReadConnection, evaluation_id: uuid.UUID, check_id: str, example_id: str, repeat: int
) -> Any:
    """One stored case, or None."""
    return await reader.fetchrow(CASE_SQL, evaluation_id, check_id, example_id, repeat)


async def scorer_digest(
    reader: ReadConnection, project_id: uuid.UUID, name: str, version: str
) -> str | None:
    """The digest of a registered scorer version, or None."""
    value: str | None = await reader.fetchval(SCORER_DIGEST_SQL, project_id, name, version)
    return value
