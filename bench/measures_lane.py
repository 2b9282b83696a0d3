"""Measures at ingest, counted in instructions (issue 52): what validating B's cases costs beside A's.

bench/measures.py times the whole ingest over HTTP, and on a small shared machine its rounds
spread by a third either way. This counts instead: the instructions the service's own path
spends from a request's received chunks to the rows it writes (`ndjson_line_chunks`, then
`validate_batch`: the lines lane, the measures kept as sent, the leaves hashed), for A's cases
and for B's (the same cases with four measures each, bench/measures.py's bodies), under
Valgrind's callgrind. An instruction count does not move with the machine's load: two runs
agree to a few parts in a million. Without the database and HTTP it is the lane's share of
the service's work, where B's extra work is done.

Each side runs twice under callgrind, once warming up only (imports, caches, the first body)
and once warming up and then validating `--cases` more; the difference is the count. The
baseline is A. Needs `valgrind` on PATH; also prints each side's native process time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from app.api.routers.body import ndjson_line_chunks
from app.domain.suites import CompiledCheck, CompiledSuite
from app.ingestion import validate_batch
from bench.common import load_note, table
from bench.ingest import CHECKS, REPEATS, example_ids
from bench.ingest_lanes import JUDGE, validator
from bench.measures import batches

BODY_CASES = 20_000
# uvloop reads at most this much at a time: the chunks a request's body arrives in.
CHUNK_BYTES = 256 * 1024
_SEPARATOR = b"\x00"


class _Received:
    """A request whose body arrives in the service's chunks (what ndjson_line_chunks reads)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def stream(self) -> AsyncIterator[bytes]:
        """The body, a chunk at a time."""
        for start in range(0, len(self.body), CHUNK_BYTES):
            yield self.body[start : start + CHUNK_BYTES]


def _suite() -> CompiledSuite:
    """bench/measures.py's 20 pass_rate checks over its 10,000 examples."""
    positions = {example: i for i, example in enumerate(example_ids())}
    checks = {
        f"c{c:02d}": CompiledCheck(
            f"c{c:02d}", "pass_rate", REPEATS, "judge", "1", JUDGE, uuid.UUID(int=c), positions
        )
        for c in range(CHECKS)
    }
    return CompiledSuite(uuid.UUID(int=CHECKS), {}, checks)


async def _validate(bodies: list[bytes]) -> int:
    """Every body's cases through the service's path; the rows built."""
    lane = validator(_suite(), ndjson=True)
    rows = 0
    for body in bodies:
        request = _Received(body)
        async for numbers, batch in ndjson_line_chunks(request, 1 << 20):  # type: ignore[arg-type]
            rows += len(validate_batch(lane, numbers, batch).rows)
    # Every batch took the lines lane, as the service's would with these bodies.
    assert lane.lines_lane
    return rows


def inner(path: Path, run: bool) -> None:
    """In the counted process: warm up on the first body, then (`run`) validate the rest."""
    bodies = path.read_bytes().split(_SEPARATOR)
    asyncio.run(_validate(bodies[:1]))
    if run:
        started = time.process_time()
        rows = asyncio.run(_validate(bodies[1:]))
        print(f"rows {rows} seconds {time.process_time() - started:.3f}")


def _counted(path: Path, run: bool) -> int:
    """Instructions callgrind counts for one inner run."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "bench.measures_lane",
            "--inner",
            str(path),
            *(["--run"] if run else []),
        ],
        capture_output=True,
        text=True,
        check=True,
        # The same string hashes every run: set and dict layouts, and so the count, repeat.
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found is not None, done.stderr[-2000:]
    return int(found.group(1))


def _native_seconds(path: Path) -> float:
    """Process seconds of one inner run outside callgrind (for scale; these do move)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.measures_lane", "--inner", str(path), "--run"],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"seconds ([\d.]+)", done.stdout)
    assert found is not None, done.stdout
    return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=100_000, help="cases counted a side")
    parser.add_argument("--inner", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner is not None:
        inner(args.inner, args.run)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not on PATH (apt-get install valgrind)")
    folder = Path(tempfile.mkdtemp(prefix="evalbook-lane-"))
    files = {}
    counted_bytes = {}
    for measured in (False, True):
        bodies = batches(BODY_CASES, measured)[: 1 + -(-args.cases // BODY_CASES)]
        counted_bytes[measured] = sum(map(len, bodies[1:]))
        files[measured] = folder / ("B" if measured else "A")
        files[measured].write_bytes(_SEPARATOR.join(bodies))
    runs = [(measured, run) for measured in (False, True) for run in (False, True)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(
            zip(runs, pool.map(lambda key: _counted(files[key[0]], key[1]), runs), strict=True)
        )
    seconds = {measured: _native_seconds(files[measured]) for measured in (False, True)}
    cases = (len(files[False].read_bytes().split(_SEPARATOR)) - 1) * BODY_CASES
    spent = {m: counts[(m, True)] - counts[(m, False)] for m in (False, True)}
    rows = [
        [
            "B, 4 measures" if measured else "A, no measures",
            f"{cases:,}",
            f"{counted_bytes[measured] / 1e6:.1f}",
            f"{spent[measured] / 1e6:,.0f}",
            f"{spent[measured] / cases:,.0f}",
            f"{seconds[measured]:.2f}",
            f"{spent[measured] / spent[False]:.4f}",
        ]
        for measured in (False, True)
    ]
    print(
        table(
            [
                "cases",
                "counted",
                "NDJSON MB",
                "instructions (M)",
                "per case",
                "native s (moves)",
                "ratio to A",
            ],
            rows,
        )
    )
    print(f"B - A: {(spent[True] - spent[False]) / cases:,.0f} instructions a case; {load_note()}")
    shutil.rmtree(folder)


if __name__ == "__main__":
    main()
