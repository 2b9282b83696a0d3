"""Issuing under concurrency, and a cut over many new entries (issue 47): the log's append is
now a definer function that computes each entry from the stored rows inside the issuing
transaction, and a checkpoint is stored only by a function that recomputes its root.

Measured: reports issued per second by 8 concurrent finishers (each: start a gate
evaluation, send 20 cases, finish; the subjects all differ, so no supersession), and the cut of
one checkpoint over 100,000 entries appended after the newest one (the process's compact range
read from the database, the root recomputed by the database), as the cutter runs it.

Also (issue 56) the service's CPU per issued report (user + system time of its process over a
run, divided by the reports; each report is three requests: start, 20 cases, finish), with one
finisher and with `--finishers`, alternated over `--rounds` rounds, with the load after each.

Targets: issuing within 10 % of the release before (run this file from a worktree of it, with
`--skip-cut`); the cut < 2 s; under 15 ms of service CPU a report, and more reports/s with more
finishers. `--reports N`, `--finishers N`, `--entries N` change the sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from app.platform.db import migrate
from bench.common import database_url, define_suite, finish_passing, load_note, served, table

SUITE = "issuing"
CASES = 20


async def issue_all(
    base: str, reports: int, finishers: int, define: bool = True
) -> tuple[float, list[float]]:
    """Issue `reports` reports from `finishers` concurrent clients: (seconds, each finish's
    whole round in ms)."""
    headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
    rounds: list[float] = []
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        if define:
            examples = [{"id": f"e{i}", "body": {"q": i}} for i in range(CASES)]
            await define_suite(client, headers, SUITE, examples, checks=1)
        await finish_passing(client, headers, SUITE, "c00", CASES)  # warm
        left = list(range(reports))

        async def finisher() -> None:
            while left:
                left.pop()
                started = time.perf_counter()
                await finish_passing(client, headers, SUITE, "c00", CASES)
                rounds.append((time.perf_counter() - started) * 1000)

        started = time.perf_counter()
        await asyncio.gather(*(finisher() for _ in range(finishers)))
        return time.perf_counter() - started, rounds


async def cut_over(db_url: str, data_dir: Path, entries: int) -> tuple[float, int]:
    """Append `entries` entries after the newest checkpoint (setup, as the owner), then time
    one cut as the cutter runs it: (seconds, the checkpoint's size)."""
    from app.platform.config import Settings
    from app.platform.db import build_engine, build_sessionmaker
    from app.services.log_keys import load_log_key
    from app.services.transparency import TransparencyLog
    from bench.transparency import fill_rest

    settings = Settings(database_url=db_url, data_dir=data_dir)
    engine = build_engine(settings, db_url)
    try:
        sessionmaker = build_sessionmaker(engine)
        key = await load_log_key(sessionmaker, settings)
        log = TransparencyLog(None, sessionmaker, key, settings)  # type: ignore[arg-type]
        while await log.cut() is not None:
            pass
        from app.services.transparency import writing

        async with writing(sessionmaker) as connection:
            size = await connection.fetchval("SELECT coalesce(max(idx) + 1, 0) FROM log_entries")
        await fill_rest(db_url, size, size + entries)
        started = time.perf_counter()
        cut = await log.cut()
        seconds = time.perf_counter() - started
        assert cut == size + entries, cut
        return seconds, cut
    finally:
        await engine.dispose()


def cpu_per_report(
    base: str, process: psutil.Process, reports: int, finishers: int, rounds: int
) -> list[list[object]]:
    """Service CPU ms a report and reports/s, one finisher against `finishers`, alternated."""
    measured: dict[int, list[tuple[float, float]]] = {1: [], finishers: []}
    loads = []
    for round_ in range(rounds):
        order = (1, finishers) if round_ % 2 == 0 else (finishers, 1)
        for count in order:
            before = process.cpu_times()
            seconds, _ = asyncio.run(issue_all(base, reports, count, define=False))
            after = process.cpu_times()
            cpu = (after.user - before.user) + (after.system - before.system)
            measured[count].append((cpu / (reports + 1) * 1000, reports / seconds))
        loads.append(load_note().split(" (")[0].removeprefix("machine load average "))
    rows: list[list[object]] = []
    for count, runs in measured.items():
        rows.append(
            [
                f"service CPU a report, {count} finisher{'s' if count > 1 else ''}",
                " ".join(f"{cpu:.1f}" for cpu, _ in runs) + " ms",
                " ".join(f"{rate:.0f}" for _, rate in runs) + " reports/s",
                f"median {statistics.median(c for c, _ in runs):.1f} ms, "
                f"{statistics.median(r for _, r in runs):.0f} reports/s; loads {', '.join(loads)}",
                "< 15 ms",
            ]
        )
    return rows


def main() -> None:
    """Run the scenarios and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reports", type=int, default=400)
    parser.add_argument("--finishers", type=int, default=8)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--skip-cut", action="store_true", help="the release before has no cut")
    parser.add_argument("--rounds", type=int, default=3, help="CPU rounds (1 and N finishers)")
    parser.add_argument(
        "--without-sweep",
        action="store_true",
        help="the background verification sweep off (it verifies each new report within 30 s)",
    )
    args = parser.parse_args()
    db_url = database_url()
    migrate(db_url)
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as data:
        sweep = {"EVALBOOK_VERIFY_SWEEP_ENABLED": "false"} if args.without_sweep else {}
        with served(db_url, Path(data), env_extra=sweep) as (base, process):
            seconds, rounds = asyncio.run(issue_all(base, args.reports, args.finishers))
            rows.append(
                [
                    f"{args.reports} reports, {args.finishers} concurrent finishers, "
                    f"{CASES} cases each",
                    f"{seconds:.1f} s",
                    f"{args.reports / seconds:,.1f} reports/s",
                    f"round p50 {statistics.median(rounds):.0f} ms, "
                    f"p99 {sorted(rounds)[int(len(rounds) * 0.99) - 1]:.0f} ms; "
                    f"RSS {process.memory_info().rss / 1e6:.0f} MB",
                    "within 10 % of before",
                ]
            )
            rows += cpu_per_report(base, process, args.reports // 4, args.finishers, args.rounds)
        if not args.skip_cut:
            seconds, size = asyncio.run(cut_over(db_url, Path(data), args.entries))
            rows.append(
                [
                    f"one cut over {args.entries:,} new entries (to {size:,})",
                    f"{seconds:.2f} s",
                    f"{args.entries / seconds:,.0f} entries/s",
                    "compact range from the database, root recomputed there",
                    "< 2 s",
                ]
            )
    print(table(["measure", "time", "rate", "note", "target"], rows))
    print(load_note())


if __name__ == "__main__":
    main()
