"""Reads under concurrency (issue 55): 100 clients calling `GET …/log` (the read that used to
hold one connection of the read pool and wait for a second) for a few seconds against one
`evalbook serve` process, beside the same load on `GET report` (the baseline, in the same run);
then how long a single GET report takes right after each burst.

Prints answers per second, p50 / p99, how many calls were refused (503) or never answered
(client timeout), and the log's throughput as a ratio to GET report's. Before the fix the log
burst never answers and the read after it times out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from app.db import migrate
from bench.common import database_url, define_suite, load_note, served, start_gate, table

CLIENT_TIMEOUT = 10.0


async def _issue(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    """A report of the 4-example suite `pools`, issued now; its id."""
    evaluation = await start_gate(client, headers, "pools")
    cases = [
        {"check_id": "c00", "example_id": f"e{i}", "repeat": 0, "status": "pass"} for i in range(4)
    ]
    r = await client.post(
        f"/api/v1/evaluations/{evaluation}/cases", json={"cases": cases}, headers=headers
    )
    assert r.status_code == 200, r.text
    r = await client.post(f"/api/v1/evaluations/{evaluation}/finish", headers=headers)
    assert r.status_code == 201, r.text
    report_id: str = r.json()["report_id"]
    return report_id


async def _burst(
    base: str, headers: dict[str, str], path: str, clients: int, seconds: float
) -> dict[str, object]:
    """`clients` loops calling `path` for `seconds`: what they were answered, and how fast."""
    latencies: list[float] = []
    outcomes: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(
        base_url=base, headers=headers, timeout=CLIENT_TIMEOUT, limits=limits
    ) as http:
        end = time.monotonic() + seconds

        async def loop() -> None:
            while time.monotonic() < end:
                started = time.monotonic()
                try:
                    answer = await http.get(path)
                except httpx.TimeoutException:
                    outcomes["no answer"] += 1
                    return
                latencies.append(time.monotonic() - started)
                outcomes[str(answer.status_code)] += 1

        began = time.monotonic()
        await asyncio.gather(*(loop() for _ in range(clients)))
        took = time.monotonic() - began
        started = time.monotonic()
        try:
            after = await http.get(path.split("/log")[0] if "/log" in path else path)
            read_after = f"{(time.monotonic() - started) * 1000:.1f} ms ({after.status_code})"
        except httpx.TimeoutException:
            read_after = f"no answer in {CLIENT_TIMEOUT:g} s"
    latencies.sort()
    return {
        "per_second": outcomes["200"] / took,
        "p50": statistics.median(latencies) * 1000 if latencies else float("nan"),
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else float("nan"),
        "refused": outcomes["503"],
        "unanswered": outcomes["no answer"],
        "read_after": read_after,
    }


async def run(clients: int, seconds: float, rounds: int) -> None:
    db_url = database_url()
    migrate(db_url)
    with tempfile.TemporaryDirectory() as data_dir, served(db_url, Path(data_dir)) as (base, _):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            examples = [{"id": f"e{i}", "body": {"q": i}} for i in range(4)]
            await define_suite(client, headers, "pools", examples, checks=1)
            report_id = await _issue(client, headers)
            await _issue(client, headers)
            deadline = time.monotonic() + 30
            while True:
                log = await client.get(f"/evaluations/api/reports/{report_id}/log", headers=headers)
                if log.json().get("checkpoint") is not None:
                    break
                assert time.monotonic() < deadline, "no checkpoint covered the report"
                await asyncio.sleep(0.2)
        rows = []
        paths = {
            "GET report (baseline)": f"/evaluations/api/reports/{report_id}",
            "GET …/log": f"/evaluations/api/reports/{report_id}/log",
        }
        results: dict[str, list[dict[str, object]]] = {name: [] for name in paths}
        for _ in range(rounds):
            for name, path in paths.items():
                results[name].append(await _burst(base, headers, path, clients, seconds))
        baseline = statistics.median(
            float(r["per_second"]) for r in results["GET report (baseline)"]
        )  # type: ignore[arg-type]
        for name, runs in results.items():
            per_second = statistics.median(float(r["per_second"]) for r in runs)  # type: ignore[arg-type]
            rows.append(
                [
                    name,
                    clients,
                    f"{per_second:,.0f}",
                    f"{statistics.median(float(r['p50']) for r in runs):.1f} / "  # type: ignore[arg-type]
                    f"{statistics.median(float(r['p99']) for r in runs):.1f}",  # type: ignore[arg-type]
                    sum(int(r["refused"]) for r in runs),  # type: ignore[call-overload]
                    sum(int(r["unanswered"]) for r in runs),  # type: ignore[call-overload]
                    "; ".join(str(r["read_after"]) for r in runs),
                    f"{per_second / baseline:.2f}" if baseline else "—",
                ]
            )
    print(
        table(
            [
                "path",
                "clients",
                "answers/s (median of rounds)",
                "p50 / p99 ms",
                "503s",
                "unanswered",
                "GET report right after each burst",
                "ratio to GET report",
            ],
            rows,
        )
    )
    print(f"{rounds} rounds of {seconds:g} s each, alternating the paths; {load_note()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(run(args.clients, args.seconds, args.rounds))


if __name__ == "__main__":
    main()
