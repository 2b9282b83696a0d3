"""The exports of one report (issue 53) against reading the report itself, in the same run:
the signed in-toto test result, the model-index and the CycloneDX BOM of a 20-check report,
each read by one client `--reads` times a round, the four reads taking turns (the order
reversed every other round) over `--rounds` rounds. Prints each read's median p50 and rate,
and its ratio to GET report's rate in the same round (the baseline: the stored body read).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from app.platform.db import migrate
from bench.common import database_url, define_suite, load_note, served, start_gate, table

CHECKS, EXAMPLES = 20, 50


async def issue(base: str, headers: dict[str, str]) -> str:
    """A report of CHECKS checks, every case passing: its id."""
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        examples = [{"id": f"e{i}", "body": {"q": i}, "tags": []} for i in range(EXAMPLES)]
        await define_suite(client, headers, "exported", examples, CHECKS)
        evaluation = await start_gate(client, headers, "exported")
        cases = [
            {"check_id": f"c{c:02d}", "example_id": f"e{i}", "repeat": 0, "status": "pass"}
            for c in range(CHECKS)
            for i in range(EXAMPLES)
        ]
        url = f"/api/v1/evaluations/{evaluation}/cases"
        assert (await client.post(url, json={"cases": cases}, headers=headers)).status_code == 200
        done = await client.post(f"/api/v1/evaluations/{evaluation}/finish", headers=headers)
        assert done.status_code == 201, done.text
        report_id: str = done.json()["report_id"]
        return report_id


def timed_reads(http: httpx.Client, path: str, reads: int) -> list[float]:
    """Milliseconds of `reads` sequential GETs of `path`."""
    out = []
    for _ in range(reads):
        started = time.perf_counter()
        answer = http.get(path)
        out.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
    return out


def main() -> None:
    """Serve, issue the report, read its exports in turns; print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reads", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    db_url = database_url()
    migrate(db_url)
    with tempfile.TemporaryDirectory() as data, served(db_url, Path(data)) as (base, _):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        report = f"/evaluations/api/reports/{asyncio.run(issue(base, headers))}"
        paths = {
            "GET report (baseline)": report,
            "test result, signed": f"{report}/attestation?predicate=test-result",
            "model-index": f"{report}/exports/model-index",
            "CycloneDX": f"{report}/exports/cyclonedx",
        }
        runs: dict[str, list[list[float]]] = {name: [] for name in paths}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
            for path in paths.values():
                timed_reads(http, path, 20)  # warm
            for round_ in range(args.rounds):
                for name in list(paths)[:: -1 if round_ % 2 else 1]:
                    runs[name].append(timed_reads(http, paths[name], args.reads))
    rows = []
    baseline = [len(r) / (sum(r) / 1000) for r in runs["GET report (baseline)"]]
    for name, rounds in runs.items():
        rates = [len(r) / (sum(r) / 1000) for r in rounds]
        ratios = [rate / base_rate for rate, base_rate in zip(rates, baseline, strict=True)]
        rows.append(
            [
                name,
                " ".join(f"{statistics.median(r):.2f}" for r in rounds),
                f"{statistics.median(rates):,.0f}",
                " ".join(f"{x:.2f}" for x in ratios),
            ]
        )
    print(
        f"{CHECKS}-check report, {EXAMPLES} examples a check; {args.reads} reads a round, one client"
    )
    print(
        table(
            ["read", "p50 ms per round", "reads/s (median)", "rate / GET report, per round"], rows
        )
    )
    print(load_note())


if __name__ == "__main__":
    main()
