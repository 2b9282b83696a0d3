"""The fast lane's worth: the four hot reads served with it and without it (the same code
below: authentication, query models, services), 32 clients each.

A database of small reports (bench/lists.py's: two suites, SUBJECTS subjects each, PER_SUBJECT
reports a subject) is read by two service processes, one with EVALBOOK_READ_FAST_LANE=false.
Each read takes turns with lane and without for ROUNDS rounds of ROUND_SECONDS; the median
req/s and p50 and the worst p99 are given, and the ratio of the lane's rate to the routed
rate. The lane stays only while that ratio is well above 1 (decision 0014).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
from pathlib import Path

import asyncpg

from app.platform.config import to_plain_url
from app.platform.db import migrate
from bench.common import database_url, load_note, served, table
from bench.lists import populate, settle
from bench.reports import hammer

SUBJECTS, PER_SUBJECT = 1_000, 5
ROUNDS, ROUND_SECONDS = 3, 3.0


async def issued_report(db_url: str) -> str:
    """A report the service issued itself (the clones have no cases to prove)."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        found = await connection.fetchval(
            "SELECT r.id FROM reports r WHERE EXISTS"
            " (SELECT 1 FROM cases c WHERE c.evaluation_id = r.evaluation_id) LIMIT 1"
        )
    finally:
        await connection.close()
    return str(found)


def reads(base: str, ids: dict[str, str]) -> dict[str, str]:
    """The four hot reads' URLs on a service."""
    api = f"{base}/evaluations/api/reports"
    return {
        "GET report": f"{api}/{ids['report']}",
        "GET forSubject": f"{api}/forSubject?digest={ids['subject']}",
        "GET list (suite, current, 50)": f"{api}?suite=alpha&status=current&limit=50",
        "GET a case's proof": f"{api}/{ids['issued']}/cases/accuracy/e1/0",
    }


def measure(
    lane: str, routed: str, headers: dict[str, str], ids: dict[str, str]
) -> list[list[object]]:
    """Each read, with the lane and without, taking turns; one table row per read."""
    rows: list[list[object]] = []
    for (name, fast), slow in zip(
        reads(lane, ids).items(), reads(routed, ids).values(), strict=True
    ):
        figures: dict[str, list[tuple[float, float, float]]] = {"lane": [], "routed": []}
        for url in (fast, slow):
            hammer(url, headers, seconds=1)  # warm-up, not counted
        for _ in range(ROUNDS):
            figures["lane"].append(hammer(fast, headers, seconds=ROUND_SECONDS))
            figures["routed"].append(hammer(slow, headers, seconds=ROUND_SECONDS))
        cells: list[object] = [name]
        rates = {}
        for side in ("lane", "routed"):
            runs = figures[side]
            rates[side] = statistics.median(r for r, _, _ in runs)
            cells += [
                f"{rates[side]:,.0f}",
                f"{statistics.median(p50 for _, p50, _ in runs):.1f}",
                f"{max(p99 for _, _, p99 in runs):.1f}",
            ]
        cells.append(f"{rates['lane'] / rates['routed']:.2f}")
        rows.append(cells)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subjects", type=int, default=SUBJECTS, help="subjects per suite")
    args = parser.parse_args()
    url = database_url()
    migrate(url)
    data_dir = Path(tempfile.mkdtemp())
    no_sweep = {"EVALBOOK_VERIFY_SWEEP_ENABLED": "false"}
    routed_only = {**no_sweep, "EVALBOOK_READ_FAST_LANE": "false"}
    with served(url, data_dir, env_extra=no_sweep) as (lane, _):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        ids = asyncio.run(populate(lane, headers, url, args.subjects, PER_SUBJECT))
        ids["issued"] = asyncio.run(issued_report(url))
        asyncio.run(settle(url))
        with served(url, data_dir, env_extra=routed_only) as (routed, _):
            rows = measure(lane, routed, headers, ids)
    header = ["read", "lane req/s", "p50 ms", "p99 ms", "routed req/s", "p50 ms", "p99 ms"]
    print(table([*header, "lane / routed"], rows))
    print(
        f"\n{ids['count']} reports; 32 connections, wrk (2 threads) on this machine; each read "
        f"{ROUNDS} times {ROUND_SECONDS:.0f} s a side, taking turns: median req/s and p50, "
        "worst p99"
    )
    print(load_note())


if __name__ == "__main__":
    main()
