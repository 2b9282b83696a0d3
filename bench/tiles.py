"""Tile reads against their ceiling, in the same run: the service (A) and a minimal Starlette
route serving the same bytes from memory (B, bench/static_tiles.py) answer 32 clients (wrk,
bench/tiles.lua: 6 level-0 tiles : 3 entry bundles : 1 level-1 tile) in turn, B first in every
other round, with the load average after each run. Target (issue 56): A >= 0.8 x B.

`--entries N` sizes the log (default 256,000: 1,000 full tiles a level-0 and entries)."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

import httpx

from app.platform.db import migrate
from app.tlog.tiles import encode_index
from bench.common import REPO, database_url, load_note, served, table, uvicorn_app
from bench.reports import hammer
from bench.transparency import fill, wait_checkpoint


def tile_paths(entries: int) -> list[str]:
    """Every full tile of a log of `entries` entries (levels 0 and 1, the entry bundles)."""
    full = entries // 256
    paths = [f"/log/tile/0/{encode_index(n)}" for n in range(full)]
    paths += [f"/log/tile/entries/{encode_index(n)}" for n in range(full)]
    return paths + [f"/log/tile/1/{encode_index(n)}" for n in range(full // 256)]


def save_tiles(base: str, paths: list[str], into: Path) -> None:
    """Read each tile once from the service (it keeps them) and save its bytes for B."""
    with httpx.Client(base_url=base, timeout=120) as http:
        for path in paths:
            answer = http.get(path)
            answer.raise_for_status()
            (into / path.lstrip("/").replace("/", "_")).write_bytes(answer.content)


def static_server(tiles: Path) -> tuple[subprocess.Popen[bytes], str]:
    """bench/static_tiles.py on a free loopback port (it reads the tiles as it starts)."""
    return uvicorn_app("bench.static_tiles:app", {"STATIC_TILES": str(tiles)}, "/log/tile/0/000")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=256_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    db_url = database_url()
    migrate(db_url)
    asyncio.run(fill(db_url, args.entries))
    os.environ["LOG_FULL_TILES"] = str(args.entries // 256)
    script = REPO / "bench" / "tiles.lua"
    rates: dict[str, list[float]] = {"A": [], "B": []}
    latencies: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    loads: list[str] = []
    with (
        tempfile.TemporaryDirectory() as data,
        served(db_url, Path(data)) as (base_a, _),
    ):
        wait_checkpoint(base_a, args.entries)
        saved = Path(data) / "tiles"
        saved.mkdir()
        save_tiles(base_a, tile_paths(args.entries), saved)
        process, base_b = static_server(saved)
        try:
            bases = {"A": base_a, "B": base_b}
            for round_ in range(args.rounds):
                for side in ("A", "B") if round_ % 2 == 0 else ("B", "A"):
                    rate, p50, p99 = hammer(
                        bases[side] + "/log/tile/0/000", {}, args.seconds, script
                    )
                    rates[side].append(rate)
                    latencies[side].append((p50, p99))
                one, five, _ = os.getloadavg()
                loads.append(f"{one:.2f}/{five:.2f}")
                print(
                    f"round {round_ + 1}: A {rates['A'][-1]:,.0f}/s, B {rates['B'][-1]:,.0f}/s,"
                    f" A/B {rates['A'][-1] / rates['B'][-1]:.2f}, load {loads[-1]}",
                    flush=True,
                )
        finally:
            process.terminate()
            process.wait(20)
    ratios = [a / b for a, b in zip(rates["A"], rates["B"], strict=True)]
    rows = [
        [
            name,
            " ".join(f"{r:,.0f}" for r in rates[side]),
            f"{statistics.median(rates[side]):,.0f}",
            f"{statistics.median(p for p, _ in latencies[side]):.1f}",
            f"{statistics.median(p for _, p in latencies[side]):.1f}",
        ]
        for side, name in (("A", "A: the service"), ("B", "B: minimal Starlette route"))
    ]
    rows.append(
        ["A / B", " ".join(f"{r:.2f}" for r in ratios), f"{statistics.median(ratios):.2f}", "", ""]
    )
    print(
        f"{args.entries:,} entries, 32 clients, {args.seconds:g} s a run; load after each round:"
        f" {', '.join(loads)}"
    )
    print(table(["side", "reads/s per round", "median", "p50 ms", "p99 ms"], rows))
    print(load_note())


if __name__ == "__main__":
    main()
