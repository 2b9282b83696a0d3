"""The verification sweep's cost: 10,000 reports verified (rate per second), and GET report's
latency under 32 clients with the sweep off, at its default pace, and sweeping without pause.

The reports are clones of one report issued over HTTP (new ids, subjects and digests, written
by COPY): the sweep's work per report (read the row and its check results, parse, hash, check
canonical form and every derived column, record) does not depend on how a report was issued.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
import orjson

from app.canonical import canonical_and_digest
from app.config import Settings, to_plain_url
from app.db import build_engine, build_sessionmaker, migrate
from app.metrics import Metrics
from app.services.sweep import sweep_once
from bench.common import database_url, served, table
from bench.reports import hammer

REPORTS = 10_000
SUITE = {
    "validity_hours": 720,
    "checks": [
        {
            "check_id": "accuracy",
            "scorer": {"name": "exact", "version": "1"},
            "dataset": {"name": "qa", "version": "1"},
            "aggregation": {"method": "pass_rate", "threshold": 0.5},
        }
    ],
}


def issue_one(base: str, headers: dict[str, str]) -> str:
    """One report, issued over HTTP; its id."""
    with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
        http.put("/api/v1/scorers/exact/versions/1", json={"definition": {}}).raise_for_status()
        examples = [{"id": f"e{i:03d}", "body": {"q": i}, "tags": []} for i in range(100)]
        http.put("/api/v1/datasets/qa/versions/1", json={"examples": examples}).raise_for_status()
        http.put("/api/v1/suites/s/versions/1", json=SUITE).raise_for_status()
        started = http.post(
            "/api/v1/evaluations",
            json={
                "subject": {"digest": "sha1:" + "0" * 40},
                "suite": {"name": "s"},
                "mode": "gate",
                "execution_mode": "platform",
            },
        )
        evaluation = started.json()["evaluation_id"]
        cases = [
            {
                "check_id": "accuracy",
                "example_id": f"e{i:03d}",
                "repeat": 0,
                "status": "pass",
                "output": {"a": i},
            }
            for i in range(100)
        ]
        http.post(
            f"/api/v1/evaluations/{evaluation}/cases", json={"cases": cases}
        ).raise_for_status()
        finished = http.post(f"/api/v1/evaluations/{evaluation}/finish")
        finished.raise_for_status()
        return str(finished.json()["report_id"])


async def clone(url: str, report_id: str, count: int) -> None:
    """`count` copies of a report, each a report of its own evaluation and subject."""
    connection = await asyncpg.connect(to_plain_url(url))
    try:
        source = uuid.UUID(report_id)
        report = await connection.fetchrow("SELECT * FROM reports WHERE id = $1", source)
        evaluation = await connection.fetchrow(
            "SELECT * FROM evaluations WHERE id = $1", report["evaluation_id"]
        )
        envelope = await connection.fetchrow(
            "SELECT * FROM report_envelopes WHERE report_id = $1", source
        )
        checks = await connection.fetch("SELECT * FROM check_results WHERE report_id = $1", source)
        body = orjson.loads(report["body"])
        evaluations, reports, envelopes, check_rows = [], [], [], []
        for n in range(count):
            rid, eid = uuid.uuid4(), uuid.uuid4()
            digest = f"sha1:{n + 1:040x}"
            copy = {**body, "report_id": str(rid), "evaluation_id": str(eid)}
            copy["subject"] = {**body["subject"], "digest": digest}
            body_bytes, body_digest = canonical_and_digest(copy)
            evaluations.append(
                {**dict(evaluation), "id": eid, "subject_digest": digest, "idempotency_key": None}
            )
            reports.append(
                {
                    **dict(report),
                    "id": rid,
                    "evaluation_id": eid,
                    "subject_digest": digest,
                    "body": body_bytes,
                    "digest": body_digest,
                }
            )
            envelopes.append({**dict(envelope), "report_id": rid, "subject_digest": digest})
            check_rows += [{**dict(c), "report_id": rid} for c in checks]
        for table_name, rows in (
            ("evaluations", evaluations),
            ("reports", reports),
            ("report_envelopes", envelopes),
            ("check_results", check_rows),
        ):
            columns = list(rows[0])
            await connection.copy_records_to_table(
                table_name, records=[tuple(r[c] for c in columns) for r in rows], columns=columns
            )
        await connection.execute("ANALYZE")
    finally:
        await connection.close()


async def sweep_all(url: str) -> tuple[float, int]:
    """Seconds to verify every report once, and how many."""
    settings = Settings(
        database_url=url, verify_sweep_every_hours=1e-9, verify_sweep_batch=REPORTS + 10
    )
    engine = build_engine(settings, url)
    try:
        started = time.perf_counter()
        outcome = await sweep_once(build_sessionmaker(engine), settings, Metrics())
        return time.perf_counter() - started, outcome.verified
    finally:
        await engine.dispose()


def main() -> None:
    url = database_url()
    migrate(url)
    data_dir = tempfile.mkdtemp(prefix="evalbook-bench-sweep-")
    load = os.getloadavg()
    rows: list[list[object]] = []
    quiet = {"EVALBOOK_VERIFY_SWEEP_ENABLED": "false"}
    with served(url, Path(data_dir), env_extra=quiet) as (base, _):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        report_id = issue_one(base, headers)
        asyncio.run(clone(url, report_id, REPORTS))
        seconds, verified = asyncio.run(sweep_all(url))
        rows.append(
            [
                f"sweep: verify {verified:,} reports",
                f"{seconds:.2f} s",
                f"{verified / seconds:,.0f} reports/s",
                "-",
            ]
        )
        read = f"{base}/evaluations/api/reports/{report_id}"
        hammer(read, headers, 2)
        rate, p50, p99 = hammer(read, headers)
        rows.append(
            [
                "GET report, sweep off",
                f"{rate:,.0f} req/s",
                f"p50 {p50:.1f} ms",
                f"p99 {p99:.1f} ms",
            ]
        )
    rows.insert(
        1,
        [
            "sweep at the default pace (500 a minute)",
            f"{500 / (verified / seconds):.2f} s of work a minute",
            f"{REPORTS / 500 / 60:.1f} h for all {REPORTS:,}",
            "-",
        ],
    )
    pause_free = {
        "EVALBOOK_VERIFY_SWEEP_ENABLED": "true",
        "EVALBOOK_VERIFY_SWEEP_EVERY_HOURS": "0.0000001",
        "EVALBOOK_VERIFY_SWEEP_BATCH": str(REPORTS + 10),
        "EVALBOOK_VERIFY_SWEEP_INTERVAL_SECONDS": "0.01",
    }
    with served(url, Path(data_dir), env_extra=pause_free) as (base, _):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        read = f"{base}/evaluations/api/reports/{report_id}"
        hammer(read, headers, 2)
        rate, p50, p99 = hammer(read, headers)
        rows.append(
            [
                "GET report, the sweep verifying without pause",
                f"{rate:,.0f} req/s",
                f"p50 {p50:.1f} ms",
                f"p99 {p99:.1f} ms",
            ]
        )
    print(table(["measure", "figure", "", ""], rows))
    print(
        f"\n{REPORTS:,} reports; wrk: 32 connections, 8 s; load average before: "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {datetime.now(UTC):%Y-%m-%d}"
    )


if __name__ == "__main__":
    main()
