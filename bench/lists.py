"""Reads with 10,000 reports: GET report, forSubject and the report lists at 32 clients, against
a minimal Starlette + asyncpg app answering the same queries (GET report; each list as the
stored bodies joined into one array, the floor of what a list costs here).

Two suites, 1,000 subjects each, 5 reports per subject (the newest current, the others
superseded): one report per suite is issued by the service, the rest are copies of it under new
ids (the list serves stored bytes; the services run without their verification sweep, which
would open an incident for every clone). Lists are read from three service processes: as it
runs (pages kept), with no pages kept (a page read anew, its reports rendered from those kept
under their versions) and keeping nothing (a page read whole). Every read is measured in two
states: right after the reports are written, and after VACUUM (ANALYZE) and CHECKPOINT; in each,
the reads take turns for three rounds (the median rate is given). The list queries' plans
are printed for both states, with when autovacuum first analyzed the tables during the first
round. Targets (issue 15): lists >= 0.5 of GET report's req/s with p99 < 50 ms; GET report and
forSubject within 1.2x of the minimal app, p99 < 25 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from app.platform.config import to_plain_url
from app.platform.db import migrate
from app.repositories.reads import list_sql
from bench.common import (
    database_url,
    finish_passing,
    load_note,
    served,
    table,
    uvicorn_app,
)
from bench.reports import hammer

SUBJECTS, PER_SUBJECT = 1_000, 5
# Each read is measured in ROUNDS rounds of ROUND_SECONDS, the reads taking turns.
ROUNDS, ROUND_SECONDS = 3, 3.0
SUITES = ("alpha", "beta")

CLONE_SQL = """
WITH template AS (
    SELECT r.*, e.expires_at FROM reports r JOIN report_envelopes e ON e.report_id = r.id
    WHERE r.id = $1
), numbered AS (
    SELECT gen_random_uuid() AS report_id, gen_random_uuid() AS evaluation_id,
           'sha1:' || md5($2 || s::text) AS subject_digest, k,
           t.issued_at - ((s * $4 + k) || ' seconds')::interval AS issued_at
    FROM template t, generate_series(0, $3 - 1) s, generate_series(0, $4 - 1) k
), evaluations AS (
    INSERT INTO evaluations (id, project_id, suite_version_id, subject, subject_digest, mode,
                             execution_mode, status, request_digest, created_by_token_id)
    SELECT n.evaluation_id, v.project_id, v.suite_version_id, v.subject, n.subject_digest,
           v.mode, v.execution_mode, 'finished', v.request_digest, v.created_by_token_id
    FROM numbered n, evaluations v WHERE v.id = (SELECT evaluation_id FROM template)
), reports AS (
    INSERT INTO reports (id, project_id, evaluation_id, suite_id, suite_version_id,
                         subject_digest, mode, result, body, digest, issued_at, valid_until)
    SELECT n.report_id, t.project_id, n.evaluation_id, t.suite_id, t.suite_version_id,
           n.subject_digest, t.mode, t.result, t.body, t.digest, n.issued_at, t.valid_until
    FROM numbered n, template t
)
INSERT INTO report_envelopes (report_id, project_id, suite_id, suite_version_id, subject_digest,
                              mode, status, expires_at, issued_at)
SELECT n.report_id, t.project_id, t.suite_id, t.suite_version_id, n.subject_digest, t.mode,
       CASE WHEN n.k = 0 THEN 'current' ELSE 'superseded' END, t.expires_at, n.issued_at
FROM numbered n, template t
"""


async def issue(client: httpx.AsyncClient, headers: dict[str, str], suite: str) -> str:
    """One small report of `suite`, issued by the service; its id."""
    for path, body in (
        ("/api/v1/scorers/judge/versions/1", {"definition": {"k": "j"}}),
        (
            "/api/v1/datasets/small/versions/1",
            {"examples": [{"id": f"e{i}", "body": {"q": i}} for i in range(20)]},
        ),
        (
            f"/api/v1/suites/{suite}/versions/1",
            {
                "validity_hours": 24 * 365,
                "checks": [
                    {
                        "check_id": "accuracy",
                        "scorer": {"name": "judge", "version": "1"},
                        "dataset": {"name": "small", "version": "1"},
                        "aggregation": {"method": "pass_rate", "threshold": 0.5},
                    }
                ],
            },
        ),
    ):
        response = await client.put(path, json=body, headers=headers)
        assert response.status_code in (200, 201), response.text
    return await finish_passing(client, headers, suite, "accuracy", 20)


# The list of a suite's current reports as it was read before migration 0015: the suite's
# reports newest first, each one's envelope looked up and the superseded ones skipped.
REPORTS_DRIVEN = (
    list_sql(("suite",), False)
    .replace(" ORDER BY", " AND e.status = $3 ORDER BY")
    .replace("LIMIT $3", "LIMIT $4")
)


async def plans(db_url: str, project: str, subject: str) -> list[list[object]]:
    """Each list query's shared buffers (deterministic) and median execution time over 21
    runs, from EXPLAIN (ANALYZE, BUFFERS); the suite's current list also as read before 0015."""
    queries = [
        ("suite=alpha&status=current", list_sql(("suite", "status"), False), ["alpha", "current"]),
        ("suite=alpha&status=current (before 0015)", REPORTS_DRIVEN, ["alpha", "current"]),
        ("status=current", list_sql(("status",), False), ["current"]),
        ("subject_digest", list_sql(("subject_digest",), False), [subject]),
        ("(no filter)", list_sql((), False), []),
        (
            "suite=alpha&status=current, versions",
            list_sql(("suite", "status"), False, versions=True),
            ["alpha", "current"],
        ),
        ("(no filter), versions", list_sql((), False, versions=True), []),
    ]
    connection = await asyncpg.connect(to_plain_url(db_url))
    rows: list[list[object]] = []
    try:
        for name, sql, args in queries:
            found: list[tuple[int, float, int]] = []
            for _ in range(21):
                [[document]] = await connection.fetch(
                    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql,
                    uuid.UUID(project),
                    *args,
                    51,
                )
                plan = json.loads(document)[0]
                top = plan["Plan"]
                found.append(
                    (
                        top["Shared Hit Blocks"] + top["Shared Read Blocks"],
                        plan["Execution Time"],
                        top["Actual Rows"],
                    )
                )
            buffers, _, count = found[-1]
            rows.append(
                [name, int(count), buffers, f"{statistics.median(t for _, t, _ in found):.2f}"]
            )
    finally:
        await connection.close()
    return rows


async def populate(
    base: str, headers: dict[str, str], db_url: str, subjects: int, per_subject: int
) -> dict[str, str]:
    """Reports (two suites, `per_subject` of each subject); ids and digests to read."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        templates = {suite: await issue(client, headers, suite) for suite in SUITES}
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        for suite, report_id in templates.items():
            await connection.execute(CLONE_SQL, uuid.UUID(report_id), suite, subjects, per_subject)
        row = await connection.fetchrow(
            "SELECT r.id, r.subject_digest, r.project_id FROM reports r"
            " JOIN report_envelopes e ON e.report_id = r.id WHERE e.status = 'current'"
            " ORDER BY r.issued_at LIMIT 1 OFFSET 500"
        )
        count = await connection.fetchval("SELECT count(*) FROM reports")
    finally:
        await connection.close()
    return {
        "report": str(row["id"]),
        "subject": row["subject_digest"],
        "project": str(row["project_id"]),
        "count": str(count),
    }


async def autovacuum_note(db_url: str, since: float) -> str:
    """When autovacuum last analyzed and vacuumed the report tables, in seconds after `since`
    (the start of the as-written round, by the database's clock), or that it has not yet: the
    as-written round's plans depend on it (without statistics the planner guesses)."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        rows = await connection.fetch(
            "SELECT relname, extract(epoch FROM last_autoanalyze) AS analyzed,"
            " extract(epoch FROM last_autovacuum) AS vacuumed FROM pg_stat_user_tables"
            " WHERE relname IN ('reports', 'report_envelopes') ORDER BY relname"
        )
    finally:
        await connection.close()

    def after(epoch: Any) -> str:
        return "not yet" if epoch is None else f"+{float(epoch) - since:.0f} s"

    return "; ".join(
        f"{row['relname']}: autoanalyze {after(row['analyzed'])}, autovacuum {after(row['vacuumed'])}"
        for row in rows
    )


async def database_clock(db_url: str) -> float:
    """The database's clock (epoch seconds)."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        return float(await connection.fetchval("SELECT extract(epoch FROM clock_timestamp())"))
    finally:
        await connection.close()


async def settle(db_url: str) -> None:
    """VACUUM (ANALYZE) and CHECKPOINT: the second round's starting point."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        await connection.execute("VACUUM (ANALYZE)")
        await connection.execute("CHECKPOINT")
    finally:
        await connection.close()


def minimal_server(db_url: str, project: str) -> tuple[subprocess.Popen[bytes], str]:
    """The minimal app under uvicorn, one worker as the service."""
    env = {"MINIMAL_DATABASE_URL": to_plain_url(db_url), "MINIMAL_PROJECT_ID": project}
    return uvicorn_app("bench.minimal_app:app", env, "/reports/" + str(uuid.uuid4()))


def measure(
    base: str,
    uncached: str,
    cold: str,
    minimal: str,
    headers: dict[str, str],
    ids: dict[str, str],
    label: str,
) -> list[list[object]]:
    """One round of every read; rows of the table. Lists are read from the service as it runs
    (pages kept under the list stamp, served again here), from a second service process with no
    pages kept (EVALBOOK_LIST_CACHE_BYTES=0: every request reads its page anew, as the first
    read after a change does, and renders the reports kept under their versions) and from a
    third keeping nothing (EVALBOOK_REPORT_ITEM_CACHE_BYTES=0 too: every request reads its
    page whole, as a process that has never listed these reports does)."""
    api = f"{base}/evaluations/api/reports"
    queries = {
        "suite=alpha&status=current": "suite=alpha&status=current&limit=50",
        "subject_digest": f"subject_digest={ids['subject']}&limit=50",
        "(no filter)": "limit=50",
        "suite=alpha&status=current, summary": "suite=alpha&status=current&limit=50&view=summary",
        "(no filter), summary": "limit=50&view=summary",
    }
    minimal_get = "minimal Starlette + asyncpg, GET report"
    # (read, url, headers, the minimal app's read it is compared with)
    reads = [
        ("GET report", f"{api}/{ids['report']}", headers, minimal_get),
        ("GET forSubject", f"{api}/forSubject?digest={ids['subject']}", headers, minimal_get),
        *(
            (f"list {name}", f"{api}?{query}", headers, f"minimal, list {name}")
            for name, query in queries.items()
        ),
        *(
            (
                f"list {name}, {kept}",
                f"{service}/evaluations/api/reports?{query}",
                headers,
                f"minimal, list {name}",
            )
            for kept, service in (("no pages kept", uncached), ("nothing kept", cold))
            for name, query in queries.items()
        ),
        (minimal_get, f"{minimal}/reports/{ids['report']}", {}, minimal_get),
        *(
            (f"minimal, list {name}", f"{minimal}/reports?{query}", {}, f"minimal, list {name}")
            for name, query in queries.items()
        ),
    ]
    for _, url, with_headers, _ in reads:
        hammer(url, with_headers, seconds=2)  # warm-up, not counted
    # ROUNDS rounds of every read in turn, so that a slow minute of the machine falls on the
    # service and on the minimal app alike: the median rate and p50, the worst p99.
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name, *_ in reads}
    for _ in range(ROUNDS):
        for name, url, with_headers, _ in reads:
            runs[name].append(hammer(url, with_headers, seconds=ROUND_SECONDS))
    rates: dict[str, float] = {}
    results = []
    for name, _, _, baseline in reads:
        rate = statistics.median(run[0] for run in runs[name])
        p50 = statistics.median(run[1] for run in runs[name])
        p99 = max(run[2] for run in runs[name])
        rates[name] = rate
        results.append((name, rate, p50, p99, baseline))
    get_rate = rates["GET report"]
    return [
        [
            label,
            name,
            f"{rate:,.0f}",
            f"{p50:.1f}",
            f"{p99:.1f}",
            f"{rate / get_rate:.2f}",
            f"{rates[baseline] / rate:.2f}",
        ]
        for name, rate, p50, p99, baseline in results
    ]


def print_plans(url: str, ids: dict[str, str], per_subject: int, state: str) -> None:
    """The list queries' plan table, in a state of the tables ("as written", "after VACUUM")."""
    print(
        table(
            [f"list query ({state})", "rows", "shared buffers", "median ms"],
            asyncio.run(plans(url, ids["project"], ids["subject"])),
        )
    )
    print(f"\n{ids['count']} reports, {per_subject} per subject\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subjects", type=int, default=SUBJECTS, help="subjects per suite")
    parser.add_argument("--per-subject", type=int, default=PER_SUBJECT, help="reports each")
    parser.add_argument("--plans-only", action="store_true", help="the query plans, no load")
    args = parser.parse_args()
    url = database_url()
    migrate(url)
    rows: list[list[object]] = []
    data_dir = Path(tempfile.mkdtemp())
    # The clones carry their template's body, so the verification sweep would open an incident
    # for each (500 a minute a process), and the lists would read a growing incidents table.
    no_sweep = {"EVALBOOK_VERIFY_SWEEP_ENABLED": "false"}
    with served(url, data_dir, env_extra=no_sweep) as (base, _process):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        ids = asyncio.run(populate(base, headers, url, args.subjects, args.per_subject))
        print_plans(url, ids, args.per_subject, "as written")
        if args.plans_only:
            asyncio.run(settle(url))
            print_plans(url, ids, args.per_subject, "after VACUUM")
            return
        process, minimal = minimal_server(url, ids["project"])
        no_pages = {**no_sweep, "EVALBOOK_LIST_CACHE_BYTES": "0"}
        nothing = {**no_pages, "EVALBOOK_REPORT_ITEM_CACHE_BYTES": "0"}
        try:
            with (
                served(url, data_dir, env_extra=no_pages) as (uncached, _),
                served(url, data_dir, env_extra=nothing) as (cold, _),
            ):
                services = (base, uncached, cold, minimal)
                written_at = asyncio.run(database_clock(url))
                rows += measure(*services, headers, ids, "as written")
                vacuum_note = asyncio.run(autovacuum_note(url, written_at))
                asyncio.run(settle(url))
                rows += measure(*services, headers, ids, "after VACUUM, CHECKPOINT")
        finally:
            process.terminate()
            process.wait(10)
        print_plans(url, ids, args.per_subject, "after VACUUM")
    print(
        table(
            [
                "state",
                "read",
                "req/s",
                "p50 ms",
                "p99 ms",
                "ratio to GET report",
                "its minimal app read / this",
            ],
            rows,
        )
    )
    print(
        f"\n{ids['count']} reports; 32 connections, wrk (2 threads) on this machine; each read "
        f"{ROUNDS} times {ROUND_SECONDS:.0f} s, the reads taking turns: median req/s and p50, "
        "worst p99"
    )
    print(f"after the as-written round (times from its start): {vacuum_note}")
    print(load_note())


if __name__ == "__main__":
    main()
