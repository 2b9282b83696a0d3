"""The hot read paths (token lookup, report reads) on a raw driver connection.

These run once per API read, so they skip the ORM: one prepared statement each, outside an
explicit transaction (each statement sees one consistent snapshot).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

PRINCIPAL_SQL = """
SELECT t.id, t.name, t.kind, t.permissions, t.assurance_cap,
       p.id AS project_id, p.slug AS project_slug, o.id AS organization_id,
       o.slug AS organization_slug
FROM api_tokens t
JOIN projects p ON p.id = t.project_id
JOIN organizations o ON o.id = p.organization_id
WHERE t.secret_hash = $1 AND t.revoked_at IS NULL
"""

_OPEN_INCIDENT = (
    "EXISTS (SELECT 1 FROM incidents i WHERE i.report_id = r.id AND i.resolved_at IS NULL)"
)
_REPORT_COLUMNS = f"""
r.id, r.digest, r.body, e.status, e.superseded_by, e.superseded_at, e.superseded_reason,
e.expires_at, {_OPEN_INCIDENT}
"""
REPORT_SQL = f"""
SELECT {_REPORT_COLUMNS}
FROM reports r JOIN report_envelopes e ON e.report_id = r.id
WHERE r.id = $1 AND r.project_id = $2
"""
SUBJECT_SQL = f"""
SELECT {_REPORT_COLUMNS}
FROM report_envelopes e JOIN reports r ON r.id = e.report_id
WHERE e.project_id = $1 AND e.subject_digest = $2 AND e.status = 'current' AND e.mode = 'gate'
  AND NOT {_OPEN_INCIDENT}
ORDER BY r.issued_at DESC
"""


@dataclass(frozen=True, slots=True)
class ReportView:
    """A stored report with its envelope, as the read paths return it."""

    id: uuid.UUID
    digest: str
    body: bytes
    status: str
    superseded_by: uuid.UUID | None
    superseded_at: datetime | None
    superseded_reason: str | None
    expires_at: datetime
    has_open_incident: bool

    @property
    def report_id(self) -> uuid.UUID:
        """The envelope's key (the same id)."""
        return self.id


async def principal_row(connection: Any, secret_hash: bytes) -> Any:
    """The unrevoked token with this hash, with its project and organization."""
    return await connection.fetchrow(PRINCIPAL_SQL, secret_hash)


async def report(connection: Any, project_id: uuid.UUID, report_id: uuid.UUID) -> ReportView | None:
    """One report of the project with its envelope."""
    row = await connection.fetchrow(REPORT_SQL, report_id, project_id)
    return None if row is None else ReportView(*row)


async def current_for_subject(
    connection: Any, project_id: uuid.UUID, subject_digest: str
) -> list[ReportView]:
    """The current gate reports about a subject (one per suite by construction)."""
    return [
        ReportView(*row) for row in await connection.fetch(SUBJECT_SQL, project_id, subject_digest)
    ]


async def active_keyid(connection: Any) -> str | None:
    """The active signing key's id, on the read pool."""
    keyid: str | None = await connection.fetchval(
        "SELECT keyid FROM signing_keys WHERE status = 'active'"
    )
    return keyid


async def attestation_digests(connection: Any, report_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The digests of these reports' attestations (reports issued signed only)."""
    rows = await connection.fetch(
        "SELECT report_id, digest FROM report_attestations WHERE report_id = ANY($1::uuid[])",
        report_ids,
    )
    return {row["report_id"]: row["digest"] for row in rows}
