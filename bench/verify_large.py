"""POST verify of a million-case report (bench/reports.py's: 20 checks of 50,000), its wall
time and whose CPU it took: the service's, or the tree verifying program's (decision 0032).

With `--baseline-tree PATH` (another checkout, such as a `git worktree` of an earlier commit)
the same is measured on that tree's service, each tree on a database of its own, the trees
alternated over `--rounds`. The sweep is off in both, so that only the verify is counted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx
import psutil
from sqlalchemy import make_url

from app.platform.config import to_plain_url
from app.platform.db import migrate
from bench.common import REPO, database_url, load_note, served, table
from bench.reports import scenario, settle

QUIET = {"EVALBOOK_VERIFY_SWEEP_ENABLED": "false"}


def _cpu(process: psutil.Process) -> tuple[float, float]:
    """(the process's CPU seconds, its reaped children's)."""
    times = process.cpu_times()
    return times.user + times.system, times.children_user + times.children_system


async def _database(url: str, name: str, *, drop: bool = False) -> str:
    """A database `name` beside the bench's (created, or dropped), and its address."""
    connection = await asyncpg.connect(to_plain_url(url))
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        if not drop:
            await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    return str(make_url(url).set(database=name))


def verify_runs(tree: Path, url: str, runs: int) -> list[tuple[float, float, float]]:
    """(wall, service CPU, programs' CPU) of each verify of a new 1 M-case report, on a
    database of its own beside the bench's."""
    name = f"verify_large_{os.getpid()}"
    own = asyncio.run(_database(url, name))
    try:
        return _verify_runs(tree, own, runs)
    finally:
        asyncio.run(_database(url, name, drop=True))


def _verify_runs(tree: Path, url: str, runs: int) -> list[tuple[float, float, float]]:
    migrate(url)
    found: list[tuple[float, float, float]] = []
    with served(url, Path(tempfile.mkdtemp()), env_extra=QUIET, tree=tree) as (base, process):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        _, report, _ = asyncio.run(scenario(base, headers, url))
        asyncio.run(settle(url))
        for _ in range(runs):
            before = _cpu(process)
            started = time.perf_counter()
            answer = httpx.post(
                f"{base}/evaluations/api/reports/verify",
                json={"report_id": report["report_id"]},
                headers=headers,
                timeout=600,
            )
            wall = time.perf_counter() - started
            after = _cpu(process)
            assert answer.json()["verified"] is True, answer.text[:500]
            found.append((wall, after[0] - before[0], after[1] - before[1]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline-tree", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=1, help="alternations of the trees")
    parser.add_argument("--runs", type=int, default=3, help="verifies a report")
    args = parser.parse_args()
    url = database_url()
    trees = [("this tree", REPO)] + (
        [("baseline", args.baseline_tree)] if args.baseline_tree else []
    )
    rows: list[list[object]] = []
    for round_ in range(1, args.rounds + 1):
        for name, tree in trees:
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            runs = verify_runs(tree, url, args.runs)
            rows.append(
                [
                    f"{name}, round {round_}",
                    " ".join(f"{w:.2f}" for w, _, _ in runs),
                    " ".join(f"{c:.2f}" for _, c, _ in runs),
                    " ".join(f"{k:.2f}" for _, _, k in runs),
                    load,
                ]
            )
    headers = ["tree", "verify s", "service CPU s", "program CPU s", "load before"]
    print(table(headers, rows))
    print("a report of 1,000,000 cases in 20 checks; the sweep off; " + load_note())


if __name__ == "__main__":
    main()
