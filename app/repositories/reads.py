"""Every read of a report as a view, and the token lookup, on a driver connection.

The hot paths run once per API read, so they skip the ORM: one prepared statement each, on the
read pool outside an explicit transaction (each statement sees one consistent snapshot). A
service that reads a report inside its request's transaction passes that transaction's own
connection (`raw.read_connection`), and the same statements see what it has written.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from functools import cache
from typing import Any

from app.domain.reports import ListedView, ReportFilters, ReportView, StoredView
from app.platform.db import ReadConnection

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
# The report's log entry, by the log's (kind, report_id) unique index.
_LOG_INDEX = "(SELECT l.idx FROM log_entries l WHERE l.kind = 'report' AND l.report_id = r.id)"
_REPORT_COLUMNS = f"""
r.id, r.digest, r.body, e.status, e.superseded_by, e.superseded_at, e.superseded_reason,
e.expires_at, {_OPEN_INCIDENT}, {_LOG_INDEX}
"""
_LISTED_COLUMNS = (
    f"{_REPORT_COLUMNS}, r.issued_at, r.result, r.subject_digest, r.mode, r.valid_until"
)
REPORT_SQL = f"""
SELECT {_REPORT_COLUMNS}
FROM reports r JOIN report_envelopes e ON e.report_id = r.id
WHERE r.id = $1 AND r.project_id = $2
"""
# A report with what it was issued for (StoredView), by its id or by its evaluation's.
_STORED_SQL = f"""
SELECT {_LISTED_COLUMNS}, r.project_id, r.evaluation_id, r.suite_version_id
FROM reports r JOIN report_envelopes e ON e.report_id = r.id
WHERE r.{{key}} = $1 AND r.project_id = $2
"""
STORED_SQL = _STORED_SQL.format(key="id")
STORED_FOR_EVALUATION_SQL = _STORED_SQL.format(key="evaluation_id")
SUBJECT_SQL = f"""
SELECT {_REPORT_COLUMNS}
FROM report_envelopes e JOIN reports r ON r.id = e.report_id
WHERE e.project_id = $1 AND e.subject_digest = $2 AND e.status = 'current' AND e.mode = 'gate'
  AND NOT {_OPEN_INCIDENT}
ORDER BY r.issued_at DESC
"""


# The list filters, each a condition on a numbered parameter; the suite is named, so its id is
# looked up once (an init plan) and the (project, suite, issued_at, id) index does the rest.
LIST_FILTERS = {
    "subject_digest": "r.subject_digest = ${}",
    "suite": "r.suite_id = (SELECT s.id FROM suites s WHERE s.project_id = $1 AND s.name = ${})",
    "result": "r.result = ${}",
    "status": "e.status = ${}",
    "mode": "r.mode = ${}",
    "subject": (
        "EXISTS (SELECT 1 FROM evaluations ev WHERE ev.id = r.evaluation_id"
        " AND strpos(lower(ev.subject), lower(${})) > 0)"
    ),
}
# A list filtered by status is read from the envelopes' (project, [suite,] status, issued_at,
# report_id) indexes, so that finding a suite's current reports does not walk past its
# superseded ones; one filtered by subject too is not (a subject's few reports are found at once
# by the reports' subject index).
_ENVELOPE_FILTERS = {
    **LIST_FILTERS,
    "suite": "e.suite_id = (SELECT s.id FROM suites s WHERE s.project_id = $1 AND s.name = ${})",
    "mode": "e.mode = ${}",
    "subject": (
        "EXISTS (SELECT 1 FROM reports rs JOIN evaluations ev ON ev.id = rs.evaluation_id"
        " WHERE rs.id = e.report_id AND strpos(lower(ev.subject), lower(${})) > 0)"
    ),
}


# The open incidents, once per statement (a hashed subplan over the partial unique index), rather
# than one probe per listed report.
_OPEN_INCIDENT_IDS = "SELECT i.report_id FROM incidents i WHERE i.resolved_at IS NULL"


@cache
def list_sql(
    filters: tuple[str, ...], after: bool, bodies: bool = True, versions: bool = False
) -> str:
    """The list query for a set of filters (one statement per combination, so each is planned
    with its own index rather than one generic plan for all); without `bodies` the body column
    is left unread (an empty bytea in its place); with `versions` it reads only each report's
    id, its envelope's row version (`xmin`: every update of the row changes it) and whether it
    has an open incident, from the envelopes alone where the filters allow."""
    by_envelope = "status" in filters and "subject_digest" not in filters
    if versions and not {"suite", "subject_digest", "result"} & set(filters):
        # Unfiltered or by mode: the envelopes' (project, issued_at, report_id) index (0018).
        by_envelope = True
    if by_envelope:
        table, issued, key = _ENVELOPE_FILTERS, "e.issued_at", "e.report_id"
        source = "report_envelopes e"
        if not versions or "result" in filters:
            source += " JOIN reports r ON r.id = e.report_id"
        conditions = ["e.project_id = $1"]
    else:
        table, issued, key = LIST_FILTERS, "r.issued_at", "r.id"
        source = "reports r JOIN report_envelopes e ON e.report_id = r.id"
        conditions = ["r.project_id = $1"]
    conditions += [table[name].format(i) for i, name in enumerate(filters, start=2)]
    n = len(filters) + 2
    if after:
        conditions.append(f"({issued}, {key}) < (${n}, ${n + 1})")
        n += 2
    if versions:
        # One text a report (see ListedVersion): boolean's text is t or f.
        selected = f"concat_ws(' ', {key}, e.xmin, {key} IN ({_OPEN_INCIDENT_IDS}))"
    else:
        columns = _REPORT_COLUMNS if bodies else _REPORT_COLUMNS.replace("r.body", "''::bytea")
        selected = f"{columns}, r.issued_at, r.result, r.subject_digest, r.mode, r.valid_until"
    return (
        f"SELECT {selected} FROM {source}"
        f" WHERE {' AND '.join(conditions)} ORDER BY {issued} DESC, {key} DESC LIMIT ${n}"
    )


def _list_arguments(
    project_id: uuid.UUID,
    filters: ReportFilters,
    after: tuple[datetime, uuid.UUID] | None,
) -> tuple[tuple[str, ...], list[Any]]:
    given = filters.given()
    names = tuple(name for name in LIST_FILTERS if name in given)
    args: list[Any] = [project_id, *(given[name] for name in names)]
    if after is not None:
        args += after
    return names, args


async def report_list(
    connection: ReadConnection,
    project_id: uuid.UUID,
    filters: ReportFilters,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
    bodies: bool = True,
) -> list[ListedView]:
    """Reports of a project newest first (issued_at, id), filtered, after a keyset position;
    without `bodies`, each view's body is empty."""
    names, args = _list_arguments(project_id, filters, after)
    rows = await connection.fetch(list_sql(names, after is not None, bodies), *args, limit)
    return [ListedView(*row) for row in rows]


# A listed report's version as one text, "<id> <its envelope row's xmin> <t|f>" (t: it has an
# open incident). A page's versions arrive as strings, whose hashes Python computes once, rather
# than as (UUID, int, bool) tuples hashed again at each lookup of the kept reports.
ListedVersion = str


def version_of(report_id: uuid.UUID, xmin: int, open_incident: bool) -> ListedVersion:
    """The version the versions query writes for this report, its envelope's xmin and whether
    it has an open incident."""
    return f"{report_id} {xmin} {'t' if open_incident else 'f'}"


def version_report_id(version: ListedVersion) -> uuid.UUID:
    """The report a version names."""
    return uuid.UUID(version[:36])


async def report_list_versions(
    connection: ReadConnection,
    project_id: uuid.UUID,
    filters: ReportFilters,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[ListedVersion]:
    """The versions of the reports `report_list` would return, in its order."""
    names, args = _list_arguments(project_id, filters, after)
    sql = list_sql(names, after is not None, versions=True)
    return [row[0] for row in await connection.fetch(sql, *args, limit)]


LISTED_BY_ID_SQL = f"""
SELECT {_LISTED_COLUMNS}, e.xmin
FROM reports r JOIN report_envelopes e ON e.report_id = r.id
WHERE r.id = ANY($1::uuid[]) AND r.project_id = $2
"""


async def listed_by_id(
    connection: ReadConnection, project_id: uuid.UUID, report_ids: list[uuid.UUID]
) -> list[tuple[ListedView, int]]:
    """These reports of the project as a list shows them, each with its envelope row's xmin."""
    rows = await connection.fetch(LISTED_BY_ID_SQL, report_ids, project_id)
    return [(ListedView(*row[:-1]), row[-1]) for row in rows]


async def list_stamp(connection: ReadConnection, project_id: uuid.UUID) -> int:
    """The project's report list stamp (0 before its first report): see migration 0016."""
    stamp: int | None = await connection.fetchval(
        "SELECT stamp FROM report_list_stamps WHERE project_id = $1", project_id
    )
    return stamp or 0


async def principal_row(connection: ReadConnection, secret_hash: bytes) -> Any:
    """The unrevoked token with this hash, with its project and organization."""
    return await connection.fetchrow(PRINCIPAL_SQL, secret_hash)


async def report(
    connection: ReadConnection, project_id: uuid.UUID, report_id: uuid.UUID
) -> ReportView | None:
    """One report of the project with its envelope."""
    row = await connection.fetchrow(REPORT_SQL, report_id, project_id)
    return None if row is None else ReportView(*row)


async def stored(
    connection: ReadConnection, project_id: uuid.UUID, report_id: uuid.UUID
) -> StoredView | None:
    """One report of the project with its envelope and what it was issued for."""
    row = await connection.fetchrow(STORED_SQL, report_id, project_id)
    return None if row is None else StoredView(*row)


async def stored_for_evaluation(
    connection: ReadConnection, project_id: uuid.UUID, evaluation_id: uuid.UUID
) -> StoredView | None:
    """The report of an evaluation of the project, if issued, as `stored` reads it."""
    row = await connection.fetchrow(STORED_FOR_EVALUATION_SQL, evaluation_id, project_id)
    return None if row is None else StoredView(*row)


async def current_for_subject(
    connection: ReadConnection, project_id: uuid.UUID, subject_digest: str
) -> list[ReportView]:
    """The current gate reports about a subject (one per suite by construction)."""
    return [
        ReportView(*row) for row in await connection.fetch(SUBJECT_SQL, project_id, subject_digest)
    ]


async def active_keyid(connection: ReadConnection) -> str | None:
    """The active signing key's id, on the read pool."""
    keyid: str | None = await connection.fetchval(
        "SELECT keyid FROM signing_keys WHERE status = 'active'"
    )
    return keyid


async def attestation_digests(
    connection: ReadConnection, report_ids: list[uuid.UUID]
) -> dict[uuid.UUID, str]:
    """The digests of these reports' attestations (reports issued signed only)."""
    rows = await connection.fetch(
        "SELECT report_id, digest FROM report_attestations WHERE report_id = ANY($1::uuid[])",
        report_ids,
    )
    return {row["report_id"]: row["digest"] for row in rows}


async def suite_exists(reader: ReadConnection, project_id: uuid.UUID, suite: str) -> bool:
    """Whether the project has a suite of this name."""
    found = await reader.fetchval(
        "SELECT 1 FROM suites WHERE project_id = $1 AND name = $2", project_id, suite
    )
    return found is not None
