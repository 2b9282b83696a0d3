"""Bundle export of a 100,000-case report with 1 KiB outputs, against the ceiling: a plain
multipart upload of the same stored bytes, with the same part size, to the same S3 endpoint
(moto's server on loopback). Then both verifiers on the bundle.

Targets: build throughput >= 0.5 of the ceiling's; peak service RSS growth < 100 MB (issue 5);
verifiers >= 100 MB/s (Python) and >= 70 MB/s (Node) of uncompressed bundle (issue 15), each
timed as a whole command, as installed (its bytecode cached), alternated with the other.
`--verifiers-only BUNDLE` times just the verifiers on a bundle kept by `--keep`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import psutil
from aiobotocore.session import get_session

from app.digest.canonical import canonical_bytes
from app.platform.config import to_plain_url
from app.platform.db import migrate
from bench.common import (
    REPO,
    CpuSpent,
    PeakRss,
    case_row,
    copy_cases,
    database_url,
    define_suite,
    free_port,
    judge_digest,
    load_note,
    served,
    start_gate,
    table,
)

CHECKS = 10
EXAMPLES = 10_000
OUTPUT_BYTES = 1024
PART = int(os.environ.get("BENCH_PART_BYTES", 5 * 1024 * 1024))
BUCKET = "evalbook-bench"


def example_ids() -> list[str]:
    return [f"ex{i:06d}" for i in range(EXAMPLES)]


async def define(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    """The judge scorer, the dataset `big` and its 10-check suite."""
    examples = [
        {"id": e, "body": {"question": f"what is {e}?"}, "tags": ["t"]} for e in example_ids()
    ]
    await define_suite(client, headers, "big", examples, CHECKS)


async def load_cases(db_url: str, evaluation_id: str) -> None:
    """100,000 cases with 1 KiB random outputs, COPYed (setup, not timed)."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        scorer = await judge_digest(connection)
        rows, outputs = [], []
        for c in range(CHECKS):
            for i, e in enumerate(example_ids()):
                text = base64.b64encode(os.urandom(OUTPUT_BYTES * 3 // 4)).decode()
                output = canonical_bytes({"text": text[: OUTPUT_BYTES - 11]})
                row, kept = case_row(
                    uuid.UUID(evaluation_id),
                    f"c{c:02d}",
                    e,
                    i,
                    0,
                    "pass" if i % 10 else "fail",
                    output,
                    scorer,
                )
                rows.append(row)
                outputs.append(kept)
        await copy_cases(connection, rows, outputs)
    finally:
        await connection.close()


async def ceiling(
    endpoint: str, data: bytes, runs: int, store: psutil.Process | None = None
) -> list[CpuSpent]:
    """The time and CPU to multipart-upload `data` in PART-sized parts, one at a time, per
    run."""
    times = []
    async with get_session().create_client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    ) as client:
        for _ in range(runs):
            key = f"ceiling/{uuid.uuid4()}"
            with CpuSpent(store=store) as spent:
                upload = await client.create_multipart_upload(Bucket=BUCKET, Key=key)
                parts = []
                for number, offset in enumerate(range(0, len(data), PART), start=1):
                    answer = await client.upload_part(
                        Bucket=BUCKET,
                        Key=key,
                        UploadId=upload["UploadId"],
                        PartNumber=number,
                        Body=data[offset : offset + PART],
                    )
                    parts.append({"PartNumber": number, "ETag": answer["ETag"]})
                await client.complete_multipart_upload(
                    Bucket=BUCKET,
                    Key=key,
                    UploadId=upload["UploadId"],
                    MultipartUpload={"Parts": parts},
                )
            times.append(spent)
    return times


def floor_seconds(data: bytes) -> float:
    """The issue-56 floor for the same stored bytes: `gzip -dc | sha256sum`, one pass of
    decompressing and hashing what the export writes, as two processes on the machine."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl.gz") as file:
        file.write(data)
        file.flush()
        started = time.perf_counter()
        done = subprocess.run(
            f"gzip -dc {file.name} | sha256sum", shell=True, capture_output=True, check=True
        )
        seconds = time.perf_counter() - started
    assert len(done.stdout.split()[0]) == 64
    return seconds


def verifier_env(cache: Path) -> dict[str, str]:
    """The environment a verifier runs in: as installed, with its bytecode cached (in `cache`,
    not beside the sources), since pip compiles an installed package's modules. Without it,
    under PYTHONDONTWRITEBYTECODE every run would compile the verifier's sources again."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def verifier_seconds(command: list[str], env: dict[str, str]) -> float:
    """Wall-clock seconds of one whole verifier command (start-up included)."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, cwd=REPO, check=False, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command} failed: {done.stdout[-2000:]!r} {done.stderr[-2000:]!r}")
    return seconds


def verifier_runs(commands: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    """Each verifier once to warm its caches, then `runs` times, the verifiers alternated so
    that a slow minute of the machine falls on both."""
    with tempfile.TemporaryDirectory() as cache:
        env = verifier_env(Path(cache))
        for command in commands.values():
            verifier_seconds(command, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, command in commands.items():
                times[name].append(verifier_seconds(command, env))
    return times


async def scenario(
    base: str,
    headers: dict[str, str],
    db_url: str,
    process: psutil.Process,
    runs: int,
    store: psutil.Process | None = None,
) -> list[tuple[CpuSpent, float, bytes, float, str]]:
    """Per round: the export's time and CPU, its RSS growth, the bundle, then (alternated with
    the export) the floor's seconds on the same bytes, and the load average."""
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        await define(client, headers)
        evaluation_id = await start_gate(client, headers, "big")
        await load_cases(db_url, evaluation_id)
        finished = await client.post(f"/api/v1/evaluations/{evaluation_id}/finish", headers=headers)
        assert finished.status_code == 201, finished.text[:500]
        report_id = finished.json()["report_id"]
        results = []
        for _ in range(runs):
            with PeakRss(process) as rss, CpuSpent(process, store) as spent:
                answer = await client.post(
                    "/evaluations/api/reports/bundle",
                    json={"report_id": report_id},
                    headers=headers,
                )
            seconds = spent.wall
            assert answer.status_code == 201, answer.text[:500]
            content = await client.get(
                f"/evaluations/api/reports/bundles/{answer.json()['bundle_id']}/content",
                headers=headers,
            )
            floor = await asyncio.to_thread(floor_seconds, content.content)
            results.append((spent, rss.growth_mb, content.content, floor, load_note()))
            print(
                f"round {len(results)}: export {seconds:.3f} s, floor {floor:.3f} s,"
                f" ratio {floor / seconds:.2f}; {results[-1][4]}",
                flush=True,
            )
        return results


HEADINGS = [
    "what",
    "raw MB",
    "stored MB",
    "seconds (best / median)",
    "raw MB/s (best / median)",
    "peak RSS growth MB",
    "ratio to ceiling (best / median)",
    "target",
]
VERIFIERS = {
    "python": "evalbook verify-bundle",
    "node": "./verify-bundle.mjs (node --no-concurrent-recompilation)",
    "node, runs itself again": "node verify-bundle.mjs",
}
VERIFIER_TARGETS = {
    "python": ">= 100 MB/s (issue 15)",
    "node": ">= 70 MB/s (issue 15)",
    "node, runs itself again": "",
}


def verifier_commands(path: Path) -> dict[str, list[str]]:
    """The verifiers' whole commands on the bundle at `path`: Node as its shebang runs it, and
    as `node verify-bundle.mjs`, which starts Node once more with the shebang's flag (the flag
    keeps Node's exit from deadlocking: verify-bundle.mjs)."""
    return {
        "python": [sys.executable, "-m", "app.cli.main", "verify-bundle", str(path), "--json"],
        "node": ["node", "--no-concurrent-recompilation", "verify-bundle.mjs", str(path), "--json"],
        "node, runs itself again": ["node", "verify-bundle.mjs", str(path), "--json"],
    }


def verifier_rows(raw_mb: float, verifiers: dict[str, list[float]]) -> list[list[str]]:
    """The table's rows of the verifiers' runs (seconds and MB/s, best / median)."""
    return [
        [
            VERIFIERS[name],
            f"{raw_mb:.1f}",
            "",
            f"{min(times):.2f} / {statistics.median(times):.2f}",
            f"{raw_mb / min(times):.0f} / {raw_mb / statistics.median(times):.0f}",
            "",
            "",
            VERIFIER_TARGETS[name],
        ]
        for name, times in verifiers.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gzip-level", type=int, default=None, help="EVALBOOK_BUNDLE_GZIP_LEVEL")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", type=Path, default=None, help="save the bundle to this path")
    parser.add_argument("--verifiers-only", type=Path, default=None, metavar="BUNDLE")
    args = parser.parse_args()
    if args.verifiers_only is not None:
        raw_mb = len(gzip.decompress(args.verifiers_only.read_bytes())) / 1e6
        verifiers = verifier_runs(verifier_commands(args.verifiers_only.resolve()), args.runs)
        print(table(HEADINGS, verifier_rows(raw_mb, verifiers)))
        print(load_note())
        return
    db_url = database_url()
    migrate(db_url)
    moto_port = free_port()
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(moto_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"},
    )
    endpoint = f"http://127.0.0.1:{moto_port}"
    env = {
        "EVALBOOK_S3_ENDPOINT_URL": endpoint,
        "EVALBOOK_S3_BUCKET": BUCKET,
        "EVALBOOK_S3_ACCESS_KEY_ID": "bench",
        "EVALBOOK_S3_SECRET_ACCESS_KEY": "bench",
        "EVALBOOK_BUNDLE_PART_BYTES": str(PART),
    }
    if args.gzip_level is not None:
        env["EVALBOOK_BUNDLE_GZIP_LEVEL"] = str(args.gzip_level)
    try:
        time.sleep(2)
        with (
            tempfile.TemporaryDirectory() as data_dir,
            served(db_url, Path(data_dir), env_extra=env) as (base, process),
        ):
            headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
            store = psutil.Process(moto.pid)
            results = asyncio.run(scenario(base, headers, db_url, process, args.runs, store))
            stored = results[-1][2]
            raw = gzip.decompress(stored)
            raw_mb = len(raw) / 1e6
            ceiling_spent = asyncio.run(ceiling(endpoint, stored, args.runs, store))
            ceiling_times = [spent.wall for spent in ceiling_spent]
            path = Path(data_dir) / "bundle.jsonl.gz"
            path.write_bytes(stored)
            if args.keep is not None:
                args.keep.write_bytes(stored)
            verifiers = verifier_runs(verifier_commands(path), args.runs)
    finally:
        moto.terminate()
        moto.wait(10)
    build_times = [r[0].wall for r in results]
    floor_times = [r[3] for r in results]
    floor_ratios = [r[3] / r[0].wall for r in results]
    peak = max(r[1] for r in results)
    build_best, build_median = min(build_times), statistics.median(build_times)
    ceiling_best, ceiling_median = min(ceiling_times), statistics.median(ceiling_times)

    def runs(times: list[float]) -> str:
        return f"{min(times):.2f} / {statistics.median(times):.2f}"

    rows = [
        [
            "build (service, S3 via moto)",
            f"{raw_mb:.1f}",
            f"{len(stored) / 1e6:.1f}",
            runs(build_times),
            f"{raw_mb / build_best:.0f} / {raw_mb / build_median:.0f}",
            f"{peak:.0f}",
            f"{ceiling_best / build_best:.2f} / {ceiling_median / build_median:.2f}",
            ">= 0.5, < 100 MB",
        ],
        [
            "floor: gzip -dc | sha256sum, same bytes, same rounds",
            f"{raw_mb:.1f}",
            f"{len(stored) / 1e6:.1f}",
            runs(floor_times),
            f"{raw_mb / min(floor_times):.0f} / {raw_mb / statistics.median(floor_times):.0f}",
            "",
            f"export / floor per round: {' '.join(f'{r:.2f}' for r in floor_ratios)}"
            f" (median {statistics.median(floor_ratios):.2f})",
            ">= 0.8 (issue 56)",
        ],
        [
            "ceiling: plain multipart upload",
            f"{raw_mb:.1f}",
            f"{len(stored) / 1e6:.1f}",
            runs(ceiling_times),
            f"{raw_mb / ceiling_best:.0f} / {raw_mb / ceiling_median:.0f}",
            "",
            "1.00",
            "",
        ],
        *verifier_rows(raw_mb, verifiers),
    ]
    print(
        f"report: {CHECKS} checks x {EXAMPLES:,} examples = {CHECKS * EXAMPLES:,} cases, {OUTPUT_BYTES} B outputs;"
        f" the bundle holds the first 20,000 cases; gzip level {args.gzip_level or 'default'}"
    )
    print(table(HEADINGS, rows))
    print(cpu_table([r[0] for r in results], ceiling_spent, statistics.median(floor_times)))
    print(load_note())


def cpu_table(exports: list[CpuSpent], uploads: list[CpuSpent], floor: float) -> str:
    """Where the machine's CPU went in the export and in the plain upload (medians), and the
    least wall time that CPU allows on this machine's cores, against the floor's 0.8."""
    cores = os.cpu_count() or 1

    def median(values: list[float]) -> str:
        return f"{statistics.median(values):.3f}"

    rows = [
        [
            what,
            median([spent.wall for spent in spents]),
            median([spent.busy for spent in spents]),
            median([spent.cores_busy for spent in spents]),
            median([spent.service_seconds for spent in spents]),
            median([spent.store_seconds for spent in spents]),
            median([spent.client for spent in spents]),
            median([spent.others for spent in spents]),
            f"{statistics.median(spent.busy for spent in spents) / cores:.3f}",
        ]
        for what, spents in (("export", exports), ("plain upload", uploads))
    ]
    return (
        table(
            [
                "CPU, medians",
                "wall s",
                "machine CPU s",
                "cores busy",
                "service s",
                "object store (moto) s",
                "client s",
                "database and other s",
                f"least wall on {cores} cores s",
            ],
            rows,
        )
        + f"\nthe floor's median {floor:.3f} s: an export at 0.8 of it takes at most"
        f" {floor / 0.8:.3f} s"
    )


if __name__ == "__main__":
    main()
