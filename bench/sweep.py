"""The verification sweep's cost: 100,000 reports with 100 cases each (10 M cases) verified
(rate per second, CPU per hour at the default period), and GET report's latency under 32
clients with the sweep off and sweeping without pause.

The reports are clones of one report issued over HTTP (new ids, subjects and digests, written
by COPY), each with its own copy of the 100 case rows and its own attestation signed with the
service's key: the sweep's work per report (the row and its check results, the digest,
canonical form and derived columns, the attestation, every cases root re-hashed from the case
rows' columns, every stored output against its digest, the envelope) does not depend on how a
report was issued. `--reports N` runs a smaller set.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.digest.canonical import canonical_and_digest
from app.digest.signing import envelope as envelope_of
from app.digest.signing import keyid_of, load_private_key, report_statement
from app.platform.config import Settings, to_plain_url
from app.platform.db import build_engine, build_sessionmaker, migrate
from app.platform.metrics import Metrics
from app.workers.sweep import sweep_once
from bench.common import database_url, served, table
from bench.reports import hammer

REPORTS = 100_000
CASES_PER_REPORT = 100
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


def signing_key(data_dir: Path) -> Ed25519PrivateKey:
    """The key the served process generated and signs with."""
    (path,) = (data_dir / "keys").glob("*.pem")
    return load_private_key(path)


async def clone(url: str, report_id: str, count: int, key: Ed25519PrivateKey) -> None:
    """`count` copies of a report, each a report of its own evaluation and subject, with its
    own case rows and attestation."""
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
        keyid = keyid_of(key.public_key())
        evaluations, reports, envelopes, check_rows, attestations = [], [], [], [], []
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
            signed = envelope_of(
                report_statement(body_bytes, str(rid), body_digest, copy["subject"]), key
            )
            attestations.append(
                {
                    "report_id": rid,
                    "keyid": keyid,
                    "envelope": signed,
                    "digest": "sha256:" + hashlib.sha256(signed).hexdigest(),
                }
            )
        for table_name, rows in (
            ("evaluations", evaluations),
            ("reports", reports),
            ("report_envelopes", envelopes),
            ("check_results", check_rows),
            ("report_attestations", attestations),
        ):
            columns = list(rows[0])
            await connection.copy_records_to_table(
                table_name, records=[tuple(r[c] for c in columns) for r in rows], columns=columns
            )
        # Each clone's evaluation gets the source's case rows (by SQL, in slices).
        source_evaluation = report["evaluation_id"]
        ids = [e["id"] for e in evaluations]
        columns = [
            row[0]
            for row in await connection.fetch(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = 'cases' ORDER BY ordinal_position"
            )
        ]
        picked = ", ".join("n" if c == "evaluation_id" else f"c.{c}" for c in columns)
        for start in range(0, len(ids), 2_000):
            await connection.execute(
                f"INSERT INTO cases ({', '.join(columns)}) SELECT {picked}"
                " FROM cases c, unnest($2::uuid[]) AS n WHERE c.evaluation_id = $1",
                source_evaluation,
                ids[start : start + 2_000],
            )
        await connection.execute("ANALYZE")
    finally:
        await connection.close()


async def sweep_all(url: str, reports: int) -> tuple[float, float, int, int]:
    """Seconds (wall, and this process's CPU) to verify every report once, how many, and how
    many failed (0 when the clones are sound)."""
    settings = Settings(database_url=url, verify_sweep_every_hours=1e-9, verify_sweep_batch=1_000)
    engine = build_engine(settings, url)
    verified = failed = 0
    try:
        started, cpu = time.perf_counter(), time.process_time()
        # Rounds of the default batch until every report was verified once.
        while verified < reports + 1:
            outcome = await sweep_once(build_sessionmaker(engine), settings, Metrics())
            if not outcome.verified:
                break
            verified += outcome.verified
            failed += outcome.failed
        return time.perf_counter() - started, time.process_time() - cpu, verified, failed
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reports", type=int, default=REPORTS)
    count = parser.parse_args().reports
    url = database_url()
    migrate(url)
    data_dir = tempfile.mkdtemp(prefix="evalbook-bench-sweep-")
    load = os.getloadavg()
    rows: list[list[object]] = []
    quiet = {"EVALBOOK_VERIFY_SWEEP_ENABLED": "false"}
    with served(url, Path(data_dir), env_extra=quiet) as (base, _):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        report_id = issue_one(base, headers)
        started = time.perf_counter()
        asyncio.run(clone(url, report_id, count, signing_key(Path(data_dir))))
        print(f"cloned {count:,} reports in {time.perf_counter() - started:.0f} s", flush=True)
        rows.append(["clones made (setup)", f"{time.perf_counter() - started:.0f} s", "-", "-"])
        seconds, cpu, verified, failed = asyncio.run(sweep_all(url, count))
        cases = verified * CASES_PER_REPORT
        rows.append(
            [
                f"sweep: verify {verified:,} reports, {cases:,} cases ({failed} failed)",
                f"{seconds:.1f} s wall, {cpu:.1f} s CPU (service process)",
                f"{verified / seconds:,.0f} reports/s, {cases / seconds:,.0f} cases/s",
                "-",
            ]
        )
        rows.append(
            [
                "at the default period (every report once an hour)",
                f"{seconds / 3600:.1%} of an hour wall, {cpu / 3600:.1%} of one core",
                f"{3600 / seconds * verified:,.0f} reports an hour sweeping without pause",
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
    pause_free = {
        "EVALBOOK_VERIFY_SWEEP_ENABLED": "true",
        "EVALBOOK_VERIFY_SWEEP_EVERY_HOURS": "0.0000001",
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
        f"\n{count:,} reports; wrk: 32 connections, 8 s; load average before: "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {datetime.now(UTC):%Y-%m-%d}"
    )


if __name__ == "__main__":
    main()
