"""A board end to end through a served process (issue 54): K subjects' gate reports of one
check over N examples issued through the API (setup), then `--rounds` times POST a board of
all K (read every report's cases, rank, sign, store, log), against its floor: the statistics
alone (`rank_board` in process on the same values); then the board bundle (built, downloaded)
and both verifiers on it. Prints times, the served process's peak RSS growth, the bundle's size
and the ratio. Target: the board of 200 x 10,000 in < 5 s and < 1 GB.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import orjson
import psutil

from app.aggregation.boards import Entrant, rank_board
from app.platform.db import migrate
from bench.common import PeakRss, database_url, define_suite, load_note, served, start_gate, table
from bench.reports import settle

REPO = Path(__file__).resolve().parent.parent
# Cases a request sends.
SENT_AT_ONCE = 100_000


async def issue_field(base: str, headers: dict[str, str], subjects: int, examples: int) -> None:
    """`subjects` gate reports of check c00, pass rates spread over 0.6-0.9 (seeded)."""
    rng = np.random.default_rng(54)
    rates = np.linspace(0.6, 0.9, subjects)
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        items = [{"id": f"e{i:06d}", "body": {"q": i}, "tags": []} for i in range(examples)]
        await define_suite(client, headers, "ranked", items, 1)
        for s in range(subjects):
            evaluation = await start_gate(client, headers, "ranked")
            passed = rng.random(examples) < rates[s]
            lines = b"".join(
                orjson.dumps(
                    {
                        "check_id": "c00",
                        "example_id": f"e{i:06d}",
                        "repeat": 0,
                        "status": "pass" if passed[i] else "fail",
                    }
                )
                + b"\n"
                for i in range(examples)
            )
            url = f"/api/v1/evaluations/{evaluation}"
            chunk = lines.split(b"\n")
            for start in range(0, examples, SENT_AT_ONCE):
                sent = await client.post(
                    f"{url}/cases",
                    content=b"\n".join(chunk[start : start + SENT_AT_ONCE]) + b"\n",
                    headers={**headers, "Content-Type": "application/x-ndjson"},
                )
                assert sent.status_code == 200, sent.text[:300]
            done = await client.post(f"{url}/finish", headers=headers)
            assert done.status_code == 201, done.text[:300]


def floor(values: list[Entrant]) -> float:
    """Seconds of the statistics alone on the board's values."""
    started = time.perf_counter()
    rank_board(values, "mcnemar_exact", 0.05)
    return time.perf_counter() - started


def verify(command: list[str]) -> float:
    """Seconds of one verifier run (it must prove the bundle)."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, cwd=REPO, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    return time.perf_counter() - started


def time_boards(
    http: httpx.Client, ask: dict[str, str], rounds: int, pid: int
) -> tuple[list[float], list[float], str]:
    """Seconds and the served process's peak RSS growth of each POST board; the last board."""
    boards, peaks = [], []
    for _ in range(rounds):
        with PeakRss(psutil.Process(pid), interval=0.01) as rss:
            started = time.perf_counter()
            made = http.post("/evaluations/api/boards", json=ask)
            boards.append(time.perf_counter() - started)
        assert made.status_code == 201, made.text[:300]
        peaks.append(rss.growth_mb)
    return boards, peaks, made.json()["board_id"]


def bundle_rows(http: httpx.Client, board_id: str, data: Path) -> list[list[str]]:
    """The board's bundle built and downloaded, then each verifier on it: table rows."""
    started = time.perf_counter()
    bundle = http.post(f"/evaluations/api/boards/{board_id}/bundle")
    seconds = time.perf_counter() - started
    assert bundle.status_code == 200
    path = data / "board.jsonl.gz"
    path.write_bytes(bundle.content)
    python = verify([sys.executable, "-m", "app.cli.main", "verify-bundle", str(path)])
    node = verify(["node", "--no-concurrent-recompilation", "verify-bundle.mjs", str(path)])
    size = f"{len(bundle.content) / 1e6:.1f} MB gzip"
    return [
        ["POST bundle (built and downloaded)", size, f"{seconds:.2f} s", "", "", "", ""],
        ["evalbook verify-bundle", "", f"{python:.2f} s", "", "", "", ""],
        ["node verify-bundle.mjs", "", f"{node:.2f} s", "", "", "", ""],
    ]


def seeded_field(subjects: int, examples: int) -> list[Entrant]:
    """The values issue_field sent, rebuilt from the same seed."""
    rng = np.random.default_rng(54)
    rates = np.linspace(0.6, 0.9, subjects)
    ids = [f"e{i:06d}" for i in range(examples)]
    field = []
    for s in range(subjects):
        values = (rng.random(examples) < rates[s]).astype(float)
        field.append(Entrant(f"s{s}", f"r{s}", float(values.mean()), ids, values))
    return field


def main() -> None:
    """Serve, issue the field, time the board, its bundle and both verifiers."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subjects", type=int, default=200)
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-bundle", action="store_true", help="time the board only")
    args = parser.parse_args()
    db_url = database_url()
    migrate(db_url)
    with tempfile.TemporaryDirectory() as data, served(db_url, Path(data)) as (base, process):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        started = time.perf_counter()
        asyncio.run(issue_field(base, headers, args.subjects, args.examples))
        asyncio.run(settle(db_url))
        setup = time.perf_counter() - started
        ask = {"suite": "ranked", "version": "1", "check_id": "c00"}
        with httpx.Client(base_url=base, headers=headers, timeout=1800) as http:
            boards, peaks, board_id = time_boards(http, ask, args.rounds, process.pid)
            proofs = [] if args.no_bundle else bundle_rows(http, board_id, Path(data))
    floors = [floor(seeded_field(args.subjects, args.examples)) for _ in range(args.rounds)]
    size = (
        f"{args.subjects} x {args.examples:,} ({args.subjects * (args.subjects - 1) // 2:,} pairs)"
    )
    rows = [
        [
            "POST board (read cases, rank, sign, store, log)",
            size,
            " ".join(f"{s:.2f}" for s in boards) + " s",
            f"{max(peaks):.0f} MB",
            " ".join(f"{s:.2f}" for s in floors) + " s",
            f"{statistics.median(boards) / statistics.median(floors):.1f}",
            "< 5 s, < 1 GB" if args.subjects == 200 else "< 10 s",
        ],
        *proofs,
    ]
    headers_ = [
        "step",
        "size",
        "time per round",
        "peak RSS growth (served)",
        "floor: rank_board",
        "board / floor",
        "target",
    ]
    print(f"setup: {args.subjects} reports issued through the API in {setup:.0f} s")
    print(table(headers_, rows))
    print(load_note())


if __name__ == "__main__":
    main()
