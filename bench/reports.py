"""Finish latency for 1,000,000 cases, and GET report / forSubject under 32 concurrent clients.

Beside them, a bare FastAPI endpoint returning the same bytes from memory (the framework's
ceiling), served by uvicorn the same way. Targets: finish < 6 s; GET throughput >= 0.5 of the
bare endpoint; p99 < 50 ms.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import numpy as np

from app.digest.canonical import canonical_bytes
from app.platform.config import to_plain_url
from app.platform.db import migrate
from bench.common import (
    REPO,
    case_row,
    copy_cases,
    database_url,
    served,
    start_gate,
    table,
    uvicorn_app,
)
from bench.ingest import CHECKS, EXAMPLES, REPEATS, define, example_ids

CLIENTS = 32
SECONDS = 8.0


async def load_cases(db_url: str, evaluation_id: str, seed: int = 1) -> None:
    """The evaluation's 1,000,000 cases, 10 % failing at random (`seed`), COPYed with their
    leaves (setup, not timed)."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        scorer_digest = await connection.fetchval(
            "SELECT digest FROM scorer_versions WHERE name = 'judge' AND version = '1'"
        )
        rows, outputs = [], []
        rng = np.random.default_rng(seed)
        for c in range(CHECKS):
            passes = rng.random(EXAMPLES * REPEATS) < 0.9
            k = 0
            for position, e in enumerate(example_ids()):
                for r in range(REPEATS):
                    row, kept = case_row(
                        uuid.UUID(evaluation_id),
                        f"c{c:02d}",
                        e,
                        position,
                        r,
                        "pass" if passes[k] else "fail",
                        canonical_bytes({"answer": f"a{r}"}),
                        scorer_digest,
                    )
                    rows.append(row)
                    outputs.append(kept)
                    k += 1
        await copy_cases(connection, rows, outputs)
    finally:
        await connection.close()


def _ms(value: str) -> float:
    for unit, factor in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * factor
    raise ValueError(value)


def _wrk(command: list[str], limit: float) -> str:
    """wrk's output; a run that outlives `limit` is tried once more (wrk hung once here: it
    never returned after its -d run)."""
    try:
        return subprocess.run(
            command, capture_output=True, text=True, check=True, timeout=limit
        ).stdout
    except subprocess.TimeoutExpired:
        return subprocess.run(
            command, capture_output=True, text=True, check=True, timeout=limit
        ).stdout


def hammer(
    url: str, headers: dict[str, str], seconds: float = SECONDS, script: Path | None = None
) -> tuple[float, float, float]:
    """Requests/s, p50 and p99 (ms) of CLIENTS connections for SECONDS, measured by wrk."""
    if shutil.which("wrk") is None:
        raise SystemExit("bench/reports.py needs wrk (Debian package `wrk`) as its load generator")
    command = ["wrk", "-t2", f"-c{CLIENTS}", f"-d{seconds:.0f}s", "--latency"]
    if script is not None:
        command += ["-s", str(script)]
    for key, value in headers.items():
        command += ["-H", f"{key}: {value}"]
    output = _wrk([*command, url], seconds + 60)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", output, re.M).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", output, re.M).group(1))  # type: ignore[union-attr]
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if non_2xx:
        raise SystemExit(f"{non_2xx.group(1)} failed requests against {url}")
    return rate, p50, p99


def bare_server(payload: Path) -> tuple[subprocess.Popen[bytes], str]:
    """bench/bare_app.py serving `payload`."""
    return uvicorn_app("bench.bare_app:app", {"BARE_PAYLOAD": str(payload)}, "/bare")


async def scenario(base: str, headers: dict[str, str], db_url: str) -> tuple[float, dict, str]:
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        await define(client, headers)
        evaluation_id = await start_gate(client, headers, "big")
        await load_cases(db_url, evaluation_id)
        started = time.perf_counter()
        finished = await client.post(f"/api/v1/evaluations/{evaluation_id}/finish", headers=headers)
        seconds = time.perf_counter() - started
        assert finished.status_code == 201, finished.text[:500]
        return seconds, finished.json(), finished.text


async def settle(db_url: str) -> None:
    """Let the database reach a steady state after loading 1M rows (setup, not timed): without
    this, autovacuum and the checkpoint of the load run during the GET measurements."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        await connection.execute("VACUUM (ANALYZE) cases")
        await connection.execute("CHECKPOINT")
    finally:
        await connection.close()


def proofs(base: str, headers: dict[str, str], report_id: str) -> tuple[float, float, float]:
    """The case-proof endpoint on random cases of the 1M-case report: each check's tree is
    built by its first proof (the warm-up), then served from memory."""
    prefix = f"/evaluations/api/reports/{report_id}/cases"
    for check in range(20):  # build every tree once, as the first readers would
        httpx.get(f"{base}{prefix}/c{check:02d}/ex00000/0", headers=headers, timeout=120)
    os.environ["PROOF_PREFIX"] = prefix
    script = REPO / "bench" / "proofs.lua"
    hammer(base + prefix, headers, seconds=2, script=script)
    return hammer(base + prefix, headers, script=script)


def main() -> None:
    url = database_url()
    migrate(url)
    with served(url, Path(tempfile.mkdtemp())) as (base, _process):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        finish_seconds, report, text = asyncio.run(scenario(base, headers, url))
        asyncio.run(settle(url))
        report_url = f"{base}/evaluations/api/reports/{report['report_id']}"
        subject_url = f"{base}/evaluations/api/reports/forSubject?digest={report['body']['subject']['digest']}"
        hammer(report_url, headers, seconds=2)  # warm-up, not counted
        get_rate, get_p50, get_p99 = hammer(report_url, headers)
        subject_rate, subject_p50, subject_p99 = hammer(subject_url, headers)
        proof_rate, proof_p50, proof_p99 = proofs(base, headers, report["report_id"])
    payload = Path(tempfile.mkdtemp()) / "report.json"
    payload.write_bytes(text.encode())
    process, bare_base = bare_server(payload)
    try:
        hammer(bare_base + "/bare", {}, seconds=2)  # warm-up, as above
        bare_rate, bare_p50, bare_p99 = hammer(bare_base + "/bare", {})
    finally:
        process.terminate()
        process.wait(10)
    size_kb = len(text) / 1024
    print(
        table(
            ["measure", "figure", "target"],
            [
                ["finish, 1,000,000 cases, 20 checks", f"{finish_seconds:.2f} s", "< 6 s"],
            ],
        )
    )
    print()
    print(
        table(
            ["endpoint", "body KB", "req/s", "p50 ms", "p99 ms", "ratio to bare", "targets"],
            [
                [
                    "GET /evaluations/api/reports/{id}",
                    f"{size_kb:.0f}",
                    f"{get_rate:,.0f}",
                    f"{get_p50:.1f}",
                    f"{get_p99:.1f}",
                    f"{get_rate / bare_rate:.2f}",
                    ">= 0.5, p99 < 50 ms",
                ],
                [
                    "GET .../forSubject",
                    f"{size_kb:.0f}",
                    f"{subject_rate:,.0f}",
                    f"{subject_p50:.1f}",
                    f"{subject_p99:.1f}",
                    f"{subject_rate / bare_rate:.2f}",
                    ">= 0.5, p99 < 50 ms",
                ],
                [
                    "GET .../cases/{check}/{example}/{repeat} (random cases)",
                    "1",
                    f"{proof_rate:,.0f}",
                    f"{proof_p50:.1f}",
                    f"{proof_p99:.1f}",
                    f"{proof_rate / bare_rate:.2f}",
                    "p99 < 20 ms",
                ],
                [
                    "bare FastAPI, same bytes (ceiling)",
                    f"{size_kb:.0f}",
                    f"{bare_rate:,.0f}",
                    f"{bare_p50:.1f}",
                    f"{bare_p99:.1f}",
                    "1.00",
                    "-",
                ],
            ],
        )
    )
    print(f"\n{CLIENTS} connections for {SECONDS:.0f} s each, wrk (2 threads) on the same machine")


if __name__ == "__main__":
    main()
