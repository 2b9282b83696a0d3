"""`evalbook import inspect` of a 100,000-sample log against sending the same cases directly.

The log: Inspect itself runs the tiny task of tests/importers on `mockllm`; its header and two
of its samples (one passing, one failing) are then repeated as 100,000 samples in a `.eval`
zip written with Zstandard as Inspect writes it (3 scorers: 300,000 cases). Baseline: the same
definitions, start, cases (one streamed NDJSON request of the bytes the importer would send,
built beforehand) and finish, sent by a plain httpx client. Both create their own definitions.
Prints wall time, cases/s, the importer process's peak RSS and the ratio. Target: within 2x.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import psutil
import zipfile_zstd  # noqa: F401  (registers Zstandard with zipfile, as Inspect does)

from app.cli.importers.inspect_log import InspectLog
from app.cli.importers.plan import RuleOptions, build, case_batches
from bench.common import REPO, PeakRss, database_url, served, table
from tests.importers.inspect_run import run_inspect

SUBJECT = "sha1:" + "4f1c" * 10


def make_log(samples: int, work: Path) -> Path:
    """A real Inspect log's header and samples, repeated to `samples` samples."""
    log_dir = work / "inspect"
    real = run_inspect(log_dir, "eval", "--epochs", "1")
    with zipfile.ZipFile(real) as source:
        header = json.loads(source.read("header.json"))
        templates = [json.loads(source.read(f"samples/{s}_epoch_1.json")) for s in ("s1", "s2")]
    header["eval"]["dataset"]["samples"] = samples
    header["eval"]["dataset"]["sample_ids"] = []
    big = work / "big.eval"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_ZSTANDARD) as target:  # type: ignore[attr-defined]
        for i in range(samples):
            sample = {**templates[i % 2], "id": f"q{i:06d}", "uuid": f"u{i}"}
            sample["metadata"] = {"lang": "de" if i % 3 else "en"}
            target.writestr(f"samples/q{i:06d}_epoch_1.json", json.dumps(sample))
        target.writestr("header.json", json.dumps(header))
    return big


def run_import(base: str, token: str, log: Path, suite: str) -> tuple[float, float, str]:
    """The importer as a user runs it: seconds, its peak RSS (MB), its output."""
    env = {**os.environ, "EVALBOOK_URL": base, "EVALBOOK_TOKEN": token}
    started = time.perf_counter()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli.main",
            "import",
            "inspect",
            str(log),
            "--subject",
            f"digest={SUBJECT}",
            "--threshold",
            "0.5",
            "--suite",
            suite,
            "--no-progress",
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    with PeakRss(psutil.Process(process.pid), interval=0.02) as rss:
        output, _ = process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(output.decode())
    return seconds, rss.peak / 1e6, output.decode()


def prepare_direct(log: Path, work: Path, prefix: str) -> dict[str, Any]:
    """What the importer would send, written out beforehand under other names."""
    reader = InspectLog(log)
    plan = build(reader, RuleOptions(threshold=0.5), prefix, lambda items, **_: items)
    cases = work / "cases.ndjson"
    with cases.open("wb") as out:
        for batch, _ in case_batches(plan, 50_000):
            out.write(batch)
    dataset = plan.datasets[0]
    dataset_file = work / "dataset.ndjson"
    dataset_file.write_bytes(dataset.path.read_bytes())
    body = json.loads(json.dumps(plan.suite_body).replace('"inspect.', f'"{prefix}.'))
    prepared = {
        "scorers": [(f"{prefix}.{n.split('.', 1)[1]}", v, b) for n, v, b in plan.scorers],
        "dataset": (f"{prefix}.{dataset.name.split('.', 1)[1]}", dataset.version, dataset_file),
        "suite": (prefix, plan.suite_version, body),
        "cases": cases,
        "count": plan.case_count,
    }
    plan.workdir.cleanup()
    return prepared


def run_direct(base: str, token: str, prepared: dict[str, Any]) -> float:
    """The same requests from a plain client: seconds."""
    headers = {"Authorization": f"Bearer {token}"}
    ndjson = {**headers, "Content-Type": "application/x-ndjson"}

    def check(answer: httpx.Response) -> Any:
        assert answer.status_code < 300, answer.text
        return answer.json()

    def chunks(path: Path) -> Any:
        with path.open("rb") as stream:
            while chunk := stream.read(1 << 20):
                yield chunk

    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=600) as http:
        for name, version, body in prepared["scorers"]:
            check(
                http.put(f"/api/v1/scorers/{name}/versions/{version}", json=body, headers=headers)
            )
        name, version, path = prepared["dataset"]
        check(
            http.put(
                f"/api/v1/datasets/{name}/versions/{version}", content=chunks(path), headers=ndjson
            )
        )
        suite, version, body = prepared["suite"]
        check(http.put(f"/api/v1/suites/{suite}/versions/{version}", json=body, headers=headers))
        start = {
            "subject": {"digest": SUBJECT},
            "suite": {"name": suite, "version": version},
            "mode": "gate",
            "execution_mode": "external",
        }
        evaluation = check(http.post("/api/v1/evaluations", json=start, headers=headers))
        eid = evaluation["evaluation_id"]
        check(
            http.post(
                f"/api/v1/evaluations/{eid}/cases",
                content=chunks(prepared["cases"]),
                headers=ndjson,
            )
        )
        check(http.post(f"/api/v1/evaluations/{eid}/finish", headers=headers))
    return time.perf_counter() - started


def main() -> None:
    """Build the log, then alternate direct and import runs."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="evalbook-bench-import-"))
    log = make_log(args.samples, work)
    db_url = database_url()
    rows = []
    with served(db_url, work / "data") as (base, _):
        token = os.environ["BENCH_TOKEN"]
        for round_ in range(args.rounds):
            prepared = prepare_direct(log, work, f"direct{round_}")
            cases = prepared["count"]
            direct = run_direct(base, token, prepared)
            imported, peak, output = run_import(base, token, log, f"imported{round_}")
            assert "report " in output, output
            rows.append(
                [
                    f"{args.samples:,} samples ({log.stat().st_size / 1e6:.1f} MB .eval)",
                    f"{cases:,}",
                    f"{direct:.2f} s ({cases / direct:,.0f}/s)",
                    f"{imported:.2f} s ({cases / imported:,.0f}/s)",
                    f"{peak:.0f} MB",
                    f"{imported / direct:.2f}",
                ]
            )
    print(
        table(
            [
                "log",
                "cases",
                "direct NDJSON",
                "evalbook import",
                "importer peak RSS",
                "import / direct",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
