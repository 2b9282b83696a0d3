"""Reads under concurrency (issue 55): 100 clients calling `GET …/log` (the read that used to
hold one connection of the read pool and wait for a second) for a few seconds against one
`evalbook serve` process, beside the same load on `GET report` (the baseline, in the same run);
then how long a single GET report takes right after each burst.

wrk (Debian package `wrk`) is the load generator. Prints answers per second, p50 / p99, how
many calls were refused (non-2xx) or never answered (wrk's timeouts, 10 s), and the log's throughput as a ratio to GET report's. Before the fix the log
burst never answers and the read after it times out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.platform.db import migrate
from bench.common import database_url, define_suite, finish_passing, load_note, served, table

CLIENT_TIMEOUT = 10.0


def _wrk(base: str, headers: dict[str, str], path: str, clients: int, seconds: float) -> str:
    """wrk's report of `clients` connections calling `path` for `seconds` (None when wrk
    itself never came back)."""
    command = ["wrk", "-t2", f"-c{clients}", f"-d{seconds:.0f}s", "--latency"]
    command += ["--timeout", f"{CLIENT_TIMEOUT:.0f}s"]
    for key, value in headers.items():
        command += ["-H", f"{key}: {value}"]
    try:
        return subprocess.run(
            [*command, base + path], capture_output=True, text=True, timeout=seconds + 30
        ).stdout
    except subprocess.TimeoutExpired:
        return ""


def _ms(value: str) -> float:
    for unit, factor in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * factor
    raise ValueError(value)


@dataclass(frozen=True)
class Burst:
    """One wrk run's figures, and the GET report timed right after it."""

    per_second: float
    p50: float
    p99: float
    refused: int
    unanswered: int
    read_after: str


async def _burst(
    base: str, headers: dict[str, str], path: str, clients: int, seconds: float
) -> Burst:
    """`clients` connections calling `path` for `seconds` (wrk): what they were answered, how
    fast; then one GET report, timed."""
    output = await asyncio.to_thread(_wrk, base, headers, path, clients, seconds)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    p50 = re.search(r"^\s+50%\s+(\S+)", output, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", output, re.M)
    timeouts = re.search(r"timeout (\d+)", output)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    report_path = path.split("/log")[0]
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=CLIENT_TIMEOUT) as http:
        started = time.monotonic()
        try:
            after = await http.get(report_path)
            read_after = f"{(time.monotonic() - started) * 1000:.1f} ms ({after.status_code})"
        except httpx.TimeoutException:
            read_after = f"no answer in {CLIENT_TIMEOUT:g} s"
    answered = bool(rate and p50 and float(rate.group(1)) > 0)
    return Burst(
        per_second=float(rate.group(1)) if rate and answered else 0.0,
        p50=_ms(p50.group(1)) if p50 and answered else float("nan"),
        p99=_ms(p99.group(1)) if p99 and answered else float("nan"),
        refused=int(non_2xx.group(1)) if non_2xx else 0,
        # wrk counts only timeouts it saw end; a burst nobody answered is every client.
        unanswered=max(int(timeouts.group(1)) if timeouts else 0, 0 if answered else clients),
        read_after=read_after,
    )


async def _covered_report(base: str, headers: dict[str, str]) -> str:
    """A report a checkpoint covers (a second one issued after it); its id."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        examples = [{"id": f"e{i}", "body": {"q": i}} for i in range(4)]
        await define_suite(client, headers, "pools", examples, checks=1)
        report_id = await finish_passing(client, headers, "pools", "c00", 4)
        await finish_passing(client, headers, "pools", "c00", 4)
        deadline = time.monotonic() + 30
        while True:
            log = await client.get(f"/evaluations/api/reports/{report_id}/log", headers=headers)
            if log.json().get("checkpoint") is not None:
                return report_id
            assert time.monotonic() < deadline, "no checkpoint covered the report"
            await asyncio.sleep(0.2)


def _row(name: str, clients: int, runs: list[Burst], baseline: float) -> list[object]:
    per_second = statistics.median(run.per_second for run in runs)
    return [
        name,
        clients,
        f"{per_second:,.0f}",
        f"{statistics.median(run.p50 for run in runs):.1f} / "
        f"{statistics.median(run.p99 for run in runs):.1f}",
        sum(run.refused for run in runs),
        sum(run.unanswered for run in runs),
        "; ".join(run.read_after for run in runs),
        f"{per_second / baseline:.2f}" if baseline else "—",
    ]


HEADERS = [
    "path",
    "clients",
    "answers/s (median of rounds)",
    "p50 / p99 ms",
    "non-2xx",
    "unanswered",
    "GET report right after each burst",
    "ratio to GET report",
]


async def run(db_url: str, clients: int, seconds: float, rounds: int) -> None:
    """Both paths, alternated, `rounds` times; the table is printed before the service is
    stopped (a wedged one may not stop)."""
    with tempfile.TemporaryDirectory() as data_dir, served(db_url, Path(data_dir)) as (base, _):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        report_id = await _covered_report(base, headers)
        paths = {
            "GET report (baseline)": f"/evaluations/api/reports/{report_id}",
            "GET …/log": f"/evaluations/api/reports/{report_id}/log",
        }
        results: dict[str, list[Burst]] = {name: [] for name in paths}
        for _ in range(rounds):
            for name, path in paths.items():
                results[name].append(await _burst(base, headers, path, clients, seconds))
        baseline = statistics.median(run.per_second for run in results["GET report (baseline)"])
        rows = [_row(name, clients, runs, baseline) for name, runs in results.items()]
        print(table(HEADERS, rows))
        print(f"{rounds} rounds of {seconds:g} s each, alternating the paths; {load_note()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    db_url = database_url()
    migrate(db_url)
    try:
        asyncio.run(run(db_url, args.clients, args.seconds, args.rounds))
    except subprocess.TimeoutExpired as exc:
        # A wedged service does not stop on SIGTERM: say so, and kill it.
        print(f"the service did not stop within {exc.timeout:g} s of SIGTERM; killed")
        subprocess.run(["pkill", "-9", "-f", "app.cli.main serve"], check=False)


if __name__ == "__main__":
    main()
