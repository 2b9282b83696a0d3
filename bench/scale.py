"""Finish at scale: 250k, 1M, 4M and 10M cases (20 checks x N examples x 5 repeats), tiny
outputs; and 1M cases with 1 KiB outputs.

Cases are written by SQL (setup, not timed), each with the leaf the service would store, right
before the finish is timed, as after an ingest. For each size: finish seconds, microseconds per
case, the service's RSS growth at its peak and what is left of it a few seconds later. The
log-log slope of time against cases is fitted over the tiny-output sizes. The machine's load
average is printed with the table. Targets (issue 15): 10M < 20 s, RSS growth < 1.5 GB and
released afterwards, slope <= 1.05 from 250k to 10M, 1 KiB outputs <= 1.3x tiny.
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
import numpy as np

from app.platform.config import to_plain_url
from app.platform.db import migrate
from bench.common import PeakRss, database_url, judge_digest, load_note, served, start_gate, table
from bench.ingest import define as define_suite

CHECKS, REPEATS = 20, 5
SIZES = {"250k": 2_500, "1M": 10_000, "4M": 40_000, "10M": 100_000}
PAD = {"tiny": 0, "1 KiB": 1000}

# Each case has its own output ({"answer": "<padding><check>/<example>/<repeat>"}, canonical JSON
# as written; in the row up to 128 bytes, in `case_outputs` past that, as ingest stores it) and
# digest, and the leaf the service would store, as app.digest.merkle.case_record writes
# it (strings escaped by to_json, as RFC 8785 does for these ASCII ids).
LOAD_SQL = """
WITH generated AS (
    SELECT c.check_id, e.example_id, e.position, r.repeat, s.status, o.output,
           'sha256:' || encode(sha256(convert_to(o.output, 'UTF8')), 'hex') AS digest
    FROM (SELECT format('c%s', lpad(i::text, 2, '0')) AS check_id
          FROM generate_series(0, 19) i) c
    CROSS JOIN (SELECT format('ex%s', lpad(i::text, 6, '0')) AS example_id, i AS position
                FROM generate_series(0, $2::int - 1) i) e
    CROSS JOIN generate_series(0, 4) r(repeat)
    CROSS JOIN LATERAL (SELECT CASE WHEN hashtext(c.check_id || e.example_id || r.repeat) % 10 = 0
                        THEN 'fail' ELSE 'pass' END AS status) s
    CROSS JOIN LATERAL (SELECT '{"answer":"' || repeat('x', $3::int) || c.check_id || '/'
                        || e.example_id || '/' || r.repeat || '"}' AS output) o
    ORDER BY c.check_id, e.example_id, r.repeat
), outputs AS (
    INSERT INTO case_outputs (evaluation_id, check_id, example_id, repeat, output)
    SELECT $1::uuid, check_id, example_id, repeat, output FROM generated
    WHERE octet_length(output) > 128
)
INSERT INTO cases (evaluation_id, check_id, example_id, example_position, repeat, status,
                   output, output_digest, scorer_version, assurance, leaf)
SELECT $1::uuid, check_id, example_id, position, repeat, status,
       CASE WHEN octet_length(output) <= 128 THEN output END, digest, '1',
       'platform_verified',
       sha256('\\x00'::bytea || convert_to(
           '{"assurance":"platform_verified","evidence_refs":[],"example_id":'
           || to_json(example_id) || ',"output_digest":"' || digest || '","repeat":'
           || repeat || ',"score":null,"scorer_digest":' || to_json($4::text)
           || ',"status":"' || status || '","trace_digest":null}', 'UTF8'))
FROM generated
"""


async def define(client: httpx.AsyncClient, headers: dict[str, str], examples: int) -> str:
    """A scorer, a dataset of `examples` examples and a 20-check suite; returns the suite."""
    name = f"scale-{examples}"
    await define_suite(client, headers, name, [f"ex{i:06d}" for i in range(examples)])
    return name


async def load(db_url: str, evaluation_id: str, examples: int, pad: int) -> None:
    """Write the evaluation's cases (setup)."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        scorer = await judge_digest(connection)
        await connection.execute("SET work_mem = '1GB'")
        await connection.execute(LOAD_SQL, evaluation_id, examples, pad, scorer)
    finally:
        await connection.close()


async def finish_one(
    base: str, headers: dict[str, str], db_url: str, examples: int, pad: int, process: object
) -> tuple[float, float, float]:
    """(finish seconds, peak RSS growth MB, RSS growth left 5 s later MB)."""
    async with httpx.AsyncClient(base_url=base, timeout=900) as client:
        suite = await define(client, headers, examples)
        evaluation_id = await start_gate(client, headers, suite)
        await load(db_url, evaluation_id, examples, pad)
        with PeakRss(process) as rss:  # type: ignore[arg-type]
            started = time.perf_counter()
            finished = await client.post(
                f"/api/v1/evaluations/{evaluation_id}/finish", headers=headers
            )
            seconds = time.perf_counter() - started
        assert finished.status_code == 201, finished.text[:500]
        await asyncio.sleep(5)
        left = (rss._tree_rss() - rss.start) / 1e6
        return seconds, rss.growth_mb, left


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=",".join(SIZES), help="of " + ", ".join(SIZES))
    parser.add_argument("--no-kib", action="store_true", help="skip 1M with 1 KiB outputs")
    args = parser.parse_args()
    url = database_url()
    migrate(url)
    rows: list[list[object]] = []
    fitted: list[tuple[int, float]] = []
    tiny_1m = kib_1m = None
    with served(url, Path(tempfile.mkdtemp())) as (base, process):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        runs = [(label, SIZES[label], PAD["tiny"]) for label in args.sizes.split(",")]
        if not args.no_kib:
            # Right after the tiny 1M finish, which it is compared with: after the 10M one the
            # database is still writing out its load.
            kib = ("1M, 1 KiB outputs", SIZES["1M"], PAD["1 KiB"])
            labels = [label for label, _, _ in runs]
            runs.insert(labels.index("1M") + 1 if "1M" in labels else len(runs), kib)
        for label, examples, pad in runs:
            cases = CHECKS * examples * REPEATS
            seconds, peak, left = asyncio.run(
                finish_one(base, headers, url, examples, pad, process)
            )
            if pad == PAD["tiny"]:
                fitted.append((cases, seconds))
                if label == "1M":
                    tiny_1m = seconds
            else:
                kib_1m = seconds
            rows.append(
                [
                    label,
                    f"{cases:,}",
                    f"{seconds:.2f}",
                    f"{seconds / cases * 1e6:.2f}",
                    f"{peak:,.0f}",
                    f"{left:,.0f}",
                ]
            )
            print(rows[-1], flush=True)
    print()
    print(
        table(
            ["finish", "cases", "seconds", "µs per case", "RSS growth MB (peak)", "left after 5 s"],
            rows,
        )
    )
    if len(fitted) >= 2:
        x = np.log([c for c, _ in fitted])
        y = np.log([s for _, s in fitted])
        slope = float(np.polyfit(x, y, 1)[0])
        print(f"\nlog-log slope of seconds against cases over {len(fitted)} sizes: {slope:.2f}")
    if tiny_1m and kib_1m:
        print(f"1 KiB outputs / tiny outputs at 1M: {kib_1m / tiny_1m:.2f}x")
    print(load_note())


if __name__ == "__main__":
    main()
