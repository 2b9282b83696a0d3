"""What a board reads: the current gate reports of a suite version, one per subject."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from app.db import ReadConnection

CURRENT_SQL = """
SELECT r.id, r.evaluation_id, r.subject_digest, r.digest, r.body
FROM reports r JOIN report_envelopes e ON e.report_id = r.id
WHERE r.project_id = $1 AND r.suite_version_id = $2 AND r.mode = 'gate'
  AND e.status = 'current'
  AND ($3::text[] IS NULL OR r.subject_digest = ANY($3::text[]))
ORDER BY r.subject_digest
"""


@dataclass(frozen=True)
class CurrentReport:
    """A subject's current gate report under the suite version."""

    report_id: uuid.UUID
    evaluation_id: uuid.UUID
    subject_digest: str
    digest: str
    body: bytes


async def current_gate_reports(
    reader: ReadConnection,
    project_id: uuid.UUID,
    suite_version_id: uuid.UUID,
    subjects: list[str] | None,
) -> list[CurrentReport]:
    """The current gate report of each subject (of `subjects`, or every one) under the suite
    version, by subject digest (at most one each: supersession keeps one current)."""
    rows = await reader.fetch(CURRENT_SQL, project_id, suite_version_id, subjects)
    return [CurrentReport(*row) for row in rows]
