"""Ingest 1,000,000 cases over HTTP (NDJSON batches) and by raw COPY of the same rows.

20 checks x 10,000 examples x 5 repeats, small outputs, each line written compactly (orjson:
the outputs arrive canonical, so the service keeps their bytes) or, with `--spaced`, by
`json.dumps` with its spaces (the outputs are parsed and written again). The raw COPY (the
rows built before timing, COPYed into `cases` and `case_outputs` as the service does) runs
into emptied tables before the first HTTP load and after each (`--rounds`, 2 by default), so
both sides meet the machine's changing states alike. Prints every run, each run's ratio to the
fastest COPY, the fastest load's ratio to it and the median load's to the median COPY, and
the service's peak RSS growth. Targets (issue 15): ratio >= 0.6, RSS growth < 200 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import uuid
from pathlib import Path

import asyncpg
import httpx
import orjson
import psutil

from app.digest.canonical import canonical_bytes
from app.platform.config import to_plain_url
from app.platform.db import migrate
from app.repositories.cases import driver_uuid
from bench.common import (
    CpuSpent,
    PeakRss,
    case_row,
    connections_by_worker,
    copy_cases,
    database_url,
    define_suite,
    judge_digest,
    load_note,
    post_cases,
    served,
    start_gate,
    table,
)

CHECKS = 20
EXAMPLES = 10_000
REPEATS = 5


def example_ids() -> list[str]:
    return [f"ex{i:05d}" for i in range(EXAMPLES)]


async def define(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    name: str = "big",
    ids: list[str] | None = None,
) -> None:
    """The judge scorer, a dataset `name` of `ids` (the bench's 10,000 by default) and a
    20-check pass_rate suite of the same name over it."""
    examples = [
        {"id": e, "body": {"q": e}, "tags": ["t"]} for e in (example_ids() if ids is None else ids)
    ]
    await define_suite(client, headers, name, examples, CHECKS, REPEATS)


def batches(batch_size: int, spaced: bool = False) -> list[bytes]:
    """The NDJSON request bodies, built before timing."""
    write = (lambda value: json.dumps(value).encode()) if spaced else orjson.dumps
    out: list[bytes] = []
    buf: list[bytes] = []
    for c in range(CHECKS):
        for e in example_ids():
            for r in range(REPEATS):
                buf.append(
                    write(
                        {
                            "check_id": f"c{c:02d}",
                            "example_id": e,
                            "repeat": r,
                            "status": "pass" if (c + r) % 3 else "fail",
                            "output": {"answer": f"a{r}"},
                        }
                    )
                )
                if len(buf) == batch_size:
                    out.append(b"\n".join(buf) + b"\n")
                    buf = []
    if buf:
        out.append(b"\n".join(buf) + b"\n")
    return out


async def http_ingest(
    base: str,
    headers: dict[str, str],
    bodies: list[bytes],
    concurrency: int,
    process: psutil.Process | None = None,
) -> tuple[str, CpuSpent, str]:
    """(the evaluation, the load's time and CPU, how its connections were spread over the
    service's processes, when `process` is given)."""
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        await define(client, headers)
        evaluation_id = await start_gate(client, headers, "big")
        with CpuSpent(process) as spent:
            await post_cases(client, headers, evaluation_id, bodies, concurrency)
        spread = connections_by_worker(process, base) if process is not None else "-"
        return evaluation_id, spent, spread


def case_rows(
    evaluation_id: object, scorer: str
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...] | None]]:
    """The million `cases` rows the HTTP loads send, and each one's `case_outputs` row if any."""
    rows, outputs = [], []
    for c in range(CHECKS):
        for position, e in enumerate(example_ids()):
            for r in range(REPEATS):
                row, kept = case_row(
                    evaluation_id,
                    f"c{c:02d}",
                    e,
                    position,
                    r,
                    "pass" if (c + r) % 3 else "fail",
                    canonical_bytes({"answer": f"a{r}"}),
                    scorer,
                )
                rows.append(row)
                outputs.append(kept)
    return rows, outputs


async def raw_copy(db_url: str, template_evaluation: str) -> CpuSpent:
    """The same rows, built before timing, by copy_records_to_table into `cases`."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        evaluation_id = uuid.uuid4()
        await connection.execute(
            "INSERT INTO evaluations (id, project_id, suite_version_id, subject, subject_digest,"
            " mode, execution_mode, status, request_digest, created_by_token_id)"
            " SELECT $1, project_id, suite_version_id, subject, subject_digest, mode,"
            " execution_mode, 'running', request_digest, created_by_token_id FROM evaluations"
            " WHERE id = $2",
            evaluation_id,
            uuid.UUID(template_evaluation),
        )
        scorer = await judge_digest(connection)
        # The rows carry the evaluation id as the service's do (the driver's own UUID).
        row_evaluation_id = driver_uuid(evaluation_id)
        rows, outputs = case_rows(row_evaluation_id, scorer)
        with CpuSpent() as spent:
            async with connection.transaction():
                await copy_cases(connection, rows, outputs)
        return spent
    finally:
        await connection.close()


async def prepare(base: str, headers: dict[str, str]) -> str:
    """The definitions and an evaluation whose row the raw COPYs copy (setup)."""
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        await define(client, headers)
        evaluation_id: str = await start_gate(client, headers, "big")
        return evaluation_id


async def clear(db_url: str) -> None:
    """Empty the case tables and checkpoint, so that each load starts from the same state."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        # The tables refuse TRUNCATE (append-only triggers); the bench owns its database, and
        # with replication's role no ordinary trigger fires.
        await connection.execute("SET session_replication_role = replica")
        await connection.execute("TRUNCATE cases, case_outputs")
        await connection.execute("CHECKPOINT")
    finally:
        await connection.close()


def ratios(label: str, loads: list[float], copies: list[float]) -> str:
    """The fastest load's ratio to the fastest COPY and the median load's to the median COPY."""
    return (
        f"ratio ({label}), fastest load to fastest COPY: {min(copies) / min(loads):.2f}; "
        f"median load to median COPY: {statistics.median(copies) / statistics.median(loads):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=20_000, help="cases per request")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1, help="service processes")
    parser.add_argument(
        "--spaced", action="store_true", help="lines written by json.dumps, with spaces"
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="HTTP loads, each between two raw COPYs"
    )
    args = parser.parse_args()
    url = database_url()
    migrate(url)
    total = CHECKS * EXAMPLES * REPEATS
    bodies = batches(args.batch, args.spaced)
    size_mb = sum(map(len, bodies)) / 1e6
    copies: list[CpuSpent] = []
    loads: list[tuple[CpuSpent, float, str]] = []
    with served(url, Path(tempfile.mkdtemp()), args.workers) as (base, process):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        template = asyncio.run(prepare(base, headers))
        # Raw COPY and HTTP loads alternate, each into emptied tables, so that neither side
        # meets a table the other just filled and both see the machine's states alike.
        copies.append(asyncio.run(raw_copy(url, template)))
        for _ in range(args.rounds):
            asyncio.run(clear(url))
            with PeakRss(process) as rss:
                _, spent, spread = asyncio.run(
                    http_ingest(base, headers, bodies, args.concurrency, process)
                )
            loads.append((spent, rss.growth_mb, spread))
            asyncio.run(clear(url))
            copies.append(asyncio.run(raw_copy(url, template)))
    best_copy = total / min(copy.wall for copy in copies)

    def row(path: str, spent: CpuSpent, size: str, growth: str, spread: str) -> list[str]:
        return [
            path,
            f"{total:,}",
            size,
            f"{spent.wall:.2f}",
            f"{total / spent.wall:,.0f}",
            f"{total / spent.wall / best_copy:.2f}",
            f"{spent.busy:.2f} ({spent.cores_busy:.2f})",
            f"{spent.service_seconds:.2f}" if spent.service is not None else "-",
            f"{spent.others:.2f}",
            growth,
            spread,
        ]

    rows = [
        row(f"HTTP NDJSON, load {index}", spent, f"{size_mb:.0f}", f"{growth:.0f}", spread)
        for index, (spent, growth, spread) in enumerate(loads, 1)
    ]
    rows += [
        row(
            f"raw asyncpg COPY, empty tables, {'before' if index == 0 else 'after'} "
            f"load {max(index, 1)}",
            spent,
            "-",
            "-",
            "-",
        )
        for index, spent in enumerate(copies)
    ]
    print(
        table(
            [
                "path",
                "cases",
                "NDJSON MB",
                "seconds",
                "cases/s",
                "ratio to the fastest raw COPY",
                "machine CPU s (cores busy)",
                "service CPU s",
                "database and other CPU s",
                "peak service RSS growth MB",
                "connections per worker",
            ],
            rows,
        )
    )
    copy_walls = [copy.wall for copy in copies]
    print("\n" + ratios("all loads", [spent.wall for spent, _, _ in loads], copy_walls))
    if args.workers > 1:
        # The kernel hands each connection to whichever worker accepts first, so a load may
        # run on fewer workers than it has connections: such loads are shown apart.
        even = [spent.wall for spent, _, spread in loads if len(set(spread.split("+"))) == 1]
        if even and len(even) < len(loads):
            print(ratios("loads whose connections were spread evenly", even, copy_walls))
    print(
        f"batch {args.batch} cases/request, {args.concurrency} concurrent requests, lines "
        f"written {'by json.dumps (spaced)' if args.spaced else 'compactly (orjson)'}; "
        "targets: ratio >= 0.6 (issue 15), RSS growth < 200 MB"
    )
    print(load_note())


if __name__ == "__main__":
    main()
