"""Measures at a million cases (issue 52): ingest and finish with and without them.

20 checks x 10,000 examples x 5 repeats over HTTP (NDJSON batches, as bench/ingest.py), once as
plain cases (A) and once with four measures each (B: latency_ms, input_tokens, output_tokens,
cost_usd), into a suite that adds a p95 latency check (quantile, lower is better) per check
(`--measure-checks`: 1 by default, over the first check; 20 reads every check's). A and B
alternate (A first in odd rounds, B first in even ones), each load into emptied tables, over
`--rounds` rounds; each evaluation is finished after its load. Prints every run, /proc/loadavg,
and B's medians as ratios to A's. Targets: ingest B / A <= 1.15, finish B / A <= 1.2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import orjson
import psutil

from app.digest.merkle import measures_text
from app.platform.config import to_plain_url
from app.platform.db import migrate
from bench.common import (
    CpuSpent,
    database_url,
    load_note,
    post_cases,
    served,
    start_gate,
    table,
    wait_until_quiet,
)
from bench.ingest import CHECKS, EXAMPLES, REPEATS, clear, example_ids

SUITES = ("plain", "measured")


def suite_body(measure_checks: int) -> dict[str, object]:
    """The 20 pass_rate checks, and `measure_checks` p95 latency checks over the first ones."""
    checks: list[dict[str, object]] = [
        {
            "check_id": f"c{c:02d}",
            "scorer": {"name": "judge", "version": "1"},
            "dataset": {"name": "big", "version": "1"},
            "repeats": REPEATS,
            "aggregation": {"method": "pass_rate", "threshold": 0.5},
        }
        for c in range(CHECKS)
    ]
    checks += [
        {
            "check_id": f"latency-c{c:02d}",
            "measure": {"of": f"c{c:02d}", "name": "latency_ms"},
            "aggregation": {"method": "quantile", "q": 0.95, "threshold": 5000, "better": "lower"},
        }
        for c in range(measure_checks)
    ]
    return {"validity_hours": 24, "checks": checks}


async def define(base: str, headers: dict[str, str], measure_checks: int) -> None:
    """The judge scorer, the dataset, and both suites."""
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        r = await client.put(
            "/api/v1/scorers/judge/versions/1", json={"definition": {"k": "j"}}, headers=headers
        )
        assert r.status_code in (200, 201), r.text
        examples = [{"id": e, "body": {"q": e}, "tags": ["t"]} for e in example_ids()]
        r = await client.put(
            "/api/v1/datasets/big/versions/1",
            content=b"".join(orjson.dumps(example) + b"\n" for example in examples),
            headers={**headers, "Content-Type": "application/x-ndjson"},
        )
        assert r.status_code in (200, 201), r.text
        for name, count in zip(SUITES, (0, measure_checks), strict=True):
            r = await client.put(
                f"/api/v1/suites/{name}/versions/1", json=suite_body(count), headers=headers
            )
            assert r.status_code in (200, 201), r.text


def case_measures(position: int, repeat: int, check: int) -> dict[str, float]:
    """B's four measures of a case, spread over its position, repeat and check."""
    spread = (position * 7919 + repeat * 104729 + check) % 10_000
    return {
        "latency_ms": 300 + spread / 4,
        "input_tokens": 1000 + spread % 700,
        "output_tokens": 200 + spread % 90,
        "cost_usd": round(0.0004 + spread * 1e-7, 9),
    }


def batches(batch_size: int, measured: bool, canonical: bool = True) -> list[bytes]:
    """The NDJSON bodies (built before timing): bench/ingest.py's cases, with measures in B:
    in canonical form as the importer sends them, or (`canonical` false) as a dict in the order
    named, integral floats with `.0`."""
    out: list[bytes] = []
    buf: list[bytes] = []
    for c in range(CHECKS):
        for position, e in enumerate(example_ids()):
            for r in range(REPEATS):
                case: dict[str, object] = {
                    "check_id": f"c{c:02d}",
                    "example_id": e,
                    "repeat": r,
                    "status": "pass" if (c + r) % 3 else "fail",
                    "output": {"answer": f"a{r}"},
                }
                if measured:
                    measures = case_measures(position, r, c)
                    case["measures"] = (
                        orjson.Fragment(measures_text(measures)) if canonical else measures
                    )
                buf.append(orjson.dumps(case))
                if len(buf) == batch_size:
                    out.append(b"\n".join(buf) + b"\n")
                    buf = []
    if buf:
        out.append(b"\n".join(buf) + b"\n")
    return out


async def load_and_finish(
    base: str,
    headers: dict[str, str],
    suite: str,
    bodies: list[bytes],
    concurrency: int,
    service: psutil.Process | None = None,
) -> tuple[CpuSpent, float, dict[str, object], str]:
    """(the ingest's time and CPU, finish seconds, the first measure check's result if any,
    the report)."""
    async with httpx.AsyncClient(base_url=base, timeout=900) as client:
        evaluation_id = await start_gate(client, headers, suite)
        with CpuSpent(service) as ingested:
            await post_cases(client, headers, evaluation_id, bodies, concurrency)
        started = time.perf_counter()
        done = await client.post(f"/api/v1/evaluations/{evaluation_id}/finish", headers=headers)
        finished = time.perf_counter() - started
        assert done.status_code == 201, done.text[:500]
        checks = done.json()["body"]["checks"]
        measured = next((c for c in checks if "measure" in c), {})
        return ingested, finished, measured, done.json()["report_id"]


async def verified(url: str, report: str, limit: float = 180.0) -> None:
    """Wait until the background sweep has verified `report` (or `limit` seconds passed)."""
    connection = await asyncpg.connect(to_plain_url(url))
    try:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if await connection.fetchval(
                "SELECT EXISTS (SELECT 1 FROM report_verifications WHERE report_id = $1)",
                uuid.UUID(report),
            ):
                return
            # The sweep writes to the database, from another process: there is nothing to wait on here.
            await asyncio.sleep(0.5)
    finally:
        await connection.close()


def loadavg() -> str:
    """/proc/loadavg's first three numbers."""
    with open("/proc/loadavg") as stream:
        return " ".join(stream.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=20_000, help="cases per request")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measure-checks", type=int, default=1)
    parser.add_argument(
        "--unsorted",
        action="store_true",
        help="B's measures not in canonical form (names unsorted, integral floats with .0)",
    )
    parser.add_argument(
        "--without-sweep",
        action="store_true",
        help="the background verification sweep off (else it verifies each round's million-case"
        " report while the next round loads)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="start each load only once the sweep has verified the last load's report and the"
        " machine is quiet",
    )
    args = parser.parse_args()
    url = database_url()
    migrate(url)
    total = CHECKS * EXAMPLES * REPEATS
    bodies = {
        False: batches(args.batch, False),
        True: batches(args.batch, True, canonical=not args.unsorted),
    }
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    spent: dict[bool, list[CpuSpent]] = {False: [], True: []}
    report: str | None = None
    rows = []
    sweep = {"EVALBOOK_VERIFY_SWEEP_ENABLED": "false"} if args.without_sweep else {}
    with served(url, Path(tempfile.mkdtemp()), env_extra=sweep) as (base, service):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        asyncio.run(define(base, headers, args.measure_checks))
        for round_ in range(1, args.rounds + 1):
            # A then B, then B then A: a drift over the run (it slows by a tenth or more over
            # seven rounds here) falls on both sides alike instead of always on the second.
            for measured in (False, True) if round_ % 2 else (True, False):
                asyncio.run(clear(url))
                # The sweep (a round every 30 s) verifies the last load's million-case report
                # before this load starts, not during it: each side is timed on a machine
                # doing nothing else.
                started = time.perf_counter()
                if args.quiet and report is not None:
                    asyncio.run(verified(url, report))
                    wait_until_quiet()
                waited = time.perf_counter() - started
                before = loadavg()
                suite = SUITES[measured]
                cpu, finished, check, report = asyncio.run(
                    load_and_finish(
                        base, headers, suite, bodies[measured], args.concurrency, service
                    )
                )
                ingested = cpu.wall
                runs[measured].append((ingested, finished))
                spent[measured].append(cpu)
                rows.append(
                    [
                        f"{'B, 4 measures' if measured else 'A, no measures'}, round {round_}",
                        f"{sum(map(len, bodies[measured])) / 1e6:.0f}",
                        f"{ingested:.2f}",
                        f"{total / ingested:,.0f}",
                        f"{cpu.busy:.2f} ({cpu.cores_busy:.2f})",
                        f"{cpu.service_seconds:.2f}",
                        f"{cpu.others:.2f}",
                        f"{finished:.2f}",
                        f"{before} ({waited:.0f} s waited)",
                        f"{check.get('score')} ({check.get('status')})" if check else "-",
                    ]
                )
    print(
        table(
            [
                "run",
                "NDJSON MB",
                "ingest s",
                "cases/s",
                "ingest machine CPU s (cores busy)",
                "ingest service CPU s",
                "ingest database and other CPU s",
                "finish s",
                "loadavg before",
                "first p95 check",
            ],
            rows,
        )
    )
    ingest = [statistics.median(r[0] for r in runs[m]) for m in (False, True)]
    finish = [statistics.median(r[1] for r in runs[m]) for m in (False, True)]
    print(
        f"\nmedians: ingest A {ingest[0]:.2f} s, B {ingest[1]:.2f} s, B / A {ingest[1] / ingest[0]:.3f}"
        f" (target <= 1.15); finish A {finish[0]:.2f} s, B {finish[1]:.2f} s, B / A "
        f"{finish[1] / finish[0]:.3f} (target <= 1.2); {args.measure_checks} p95 checks"
    )
    # Each round's B beside its own A: the machine's drift over the run falls on both.
    rounds = [b[0] / a[0] for a, b in zip(runs[False], runs[True], strict=True)]
    print(
        "ingest B / A round by round: "
        + " ".join(f"{r:.2f}" for r in rounds)
        + f" (median {statistics.median(rounds):.3f})"
    )
    cpu = {
        measured: [
            statistics.median(getattr(s, name) for s in spent[measured])
            for name in ("busy", "service_seconds", "others")
        ]
        for measured in (False, True)
    }
    print(
        "ingest CPU medians, A / B / B - A: "
        + "; ".join(
            f"{label} {a:.2f} / {b:.2f} / {b - a:+.2f} s"
            for label, a, b in zip(
                ("machine", "service", "database and other"), cpu[False], cpu[True], strict=True
            )
        )
    )
    print(
        load_note()
        + ("; the sweep off" if args.without_sweep else "; the sweep on")
        + (
            "; each load after the sweep verified the last report and the machine went quiet"
            if args.quiet
            else ""
        )
    )


if __name__ == "__main__":
    main()
