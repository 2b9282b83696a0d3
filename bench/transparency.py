"""The transparency log, measured: cutting a checkpoint over 1,000,000 entries, tile reads per second under 32 clients (wrk), and a
witness catching up from an old checkpoint to the 1 M-entry one.

The append's cost inside issuing is measured by bench/issuing.py (the entry is computed by
the database from the stored report). Targets (docs/transparency.md): >= 5,000 tile reads/s; a witness catches
up 1 M entries in < 10 s. `--entries N` runs a smaller log.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx

from app.digest.canonical import canonical_bytes
from app.digest.merkle import leaf_hash
from app.platform.config import to_plain_url
from app.platform.db import migrate
from bench.common import REPO, database_url, load_note, served, table
from bench.reports import hammer


def entry(i: int) -> bytes:
    """A report entry as the service writes one (synthetic ids and digests)."""
    return canonical_bytes(
        {
            "kind": "report",
            "report_id": str(uuid.UUID(int=i)),
            "report_digest": f"sha256:{i:064x}",
            "attestation_digest": f"sha256:{i + 1:064x}",
            "subject_digest": f"sha1:{i:040x}",
            "suite": {"id": str(uuid.UUID(int=7)), "version": "1", "digest": "sha256:" + "7" * 64},
            "issued_at": "2026-12-03T00:00:00Z",
        }
    )


async def fill(db_url: str, entries: int) -> None:
    """The first `entries` log entries (setup, not timed)."""
    await fill_rest(db_url, 0, entries)


def wait_checkpoint(base: str, size: int, seconds: float = 600) -> float:
    """Seconds until the served checkpoint covers `size` entries."""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        answer = httpx.get(base + "/log/checkpoint", timeout=60)
        if answer.status_code == 200 and answer.text.split("\n")[1] == str(size):
            return time.perf_counter() - started
        time.sleep(0.2)
    raise SystemExit(f"no checkpoint of {size} entries within {seconds} s")


def read_every_tile(base: str, entries: int) -> tuple[float, int]:
    """Read each full tile once (levels 0 and 1 and the entry bundles): (seconds, tiles)."""
    from app.tlog.tiles import encode_index

    full = entries // 256
    paths = [f"/log/tile/0/{encode_index(n)}" for n in range(full)]
    paths += [f"/log/tile/entries/{encode_index(n)}" for n in range(full)]
    paths += [f"/log/tile/1/{encode_index(n)}" for n in range(full // 256)]
    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=120) as http:
        for path in paths:
            http.get(path).raise_for_status()
    return time.perf_counter() - started, len(paths)


def witness(base: str, key: Path, state: Path) -> tuple[int, float, str]:
    """Run `evalbook witness` once: (exit, seconds, output)."""
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "witness",
            "--log",
            base,
            "--key",
            str(key),
            "--state",
            str(state),
            "--name",
            "bench-witness",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    return done.returncode, time.perf_counter() - started, done.stdout + done.stderr


def main() -> None:
    """Run the scenarios and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    args = parser.parse_args()
    db_url = database_url()
    migrate(db_url)
    rows: list[list[object]] = []
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from app.digest.signing import write_private_key

    with tempfile.TemporaryDirectory() as data:
        key = write_private_key(Path(data) / "witness", Ed25519PrivateKey.generate())
        state = Path(data) / "witness.json"
        from app.digest.signing import load_private_key
        from app.tlog import note

        public = note.raw(load_private_key(key).public_key())
        vkey = note.Verifier("bench-witness", public, note.COSIGNATURE_V1).vkey()
        trusting = {"EVALBOOK_LOG_WITNESS_KEYS": json.dumps([vkey])}
        small = 1000
        asyncio.run(fill(db_url, small))
        (Path(data) / "a").mkdir()
        with served(db_url, Path(data) / "a", env_extra=trusting) as (base, _):
            wait_checkpoint(base, small)
            code, seconds, out = witness(base, key, state)
            assert code == 0, out
        asyncio.run(fill_rest(db_url, small, args.entries))
        # The same data directory (its signing key), a fresh process: nothing kept in memory.
        with served(db_url, Path(data) / "a", env_extra=trusting) as (base, process):
            cut = wait_checkpoint(base, args.entries)
            rows.append(
                [
                    f"first checkpoint of {args.entries:,} entries (a fresh process)",
                    f"{cut:.1f} s",
                    "-",
                    "-",
                    "-",
                ]
            )
            code, seconds, out = witness(base, key, state)
            assert code == 0, out
            rows.append(
                [
                    f"witness: from {small:,} to {args.entries:,} entries (consistency from tiles)",
                    f"{seconds:.2f} s",
                    "-",
                    "whole command, Python start included",
                    "< 10 s",
                ]
            )
            os.environ["LOG_FULL_TILES"] = str(args.entries // 256)
            cold, count = read_every_tile(base, args.entries)
            rows.append(
                [
                    "every full tile read once, cold (one client: computed, then kept)",
                    f"{cold:.1f} s",
                    f"{count / cold:,.0f} reads/s",
                    f"{count:,} tiles",
                    "-",
                ]
            )
            rate, p50, p99 = hammer(
                base + "/log/tile/0/000", {}, script=REPO / "bench" / "tiles.lua"
            )
            rows.append(
                [
                    "tile reads, 32 clients, kept (6 level-0 : 3 entry bundles : 1 level-1)",
                    f"p50 {p50:.1f} ms, p99 {p99:.1f} ms",
                    f"{rate:,.0f} reads/s",
                    f"RSS {process.memory_info().rss / 1e6:.0f} MB",
                    ">= 5,000/s",
                ]
            )
    print(table(["measure", "time", "rate", "note", "target"], rows))
    print(load_note())


async def fill_rest(db_url: str, start: int, end: int) -> None:
    """Entries [start, end) (setup)."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        batch = 100_000
        for first in range(start, end, batch):
            rows = []
            for i in range(first, min(end, first + batch)):
                data = entry(i)
                rows.append((i, "report", uuid.UUID(int=i), data, leaf_hash(data)))
            await connection.copy_records_to_table(
                "log_entries", records=rows, columns=["idx", "kind", "report_id", "entry", "leaf"]
            )
        await connection.execute("VACUUM (ANALYZE) log_entries")
    finally:
        await connection.close()


if __name__ == "__main__":
    main()
