"""What changed, measured: the diff of two 1,000,000-case reports (20 checks x 10,000 examples
x 5 repeats, 10 % of cases failing independently in each), a page of a transition's examples,
the NDJSON stream of changed cases, a check's cases page on a 1 M-case report, and a suite's
history of 1,000 gate reports.

Targets (docs/compare.md): the summary < 1 s; a page of examples < 50 ms; the stream
>= 200,000 cases/s; a check's cases page < 100 ms; the history of 1,000 reports < 200 ms.
`--history N` issues fewer history reports.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import numpy as np

from app.platform.config import to_plain_url
from app.platform.db import migrate
from app.services.kit.cursors import case_cursor
from bench.common import PeakRss, database_url, load_note, served, table
from bench.ingest import define
from bench.reports import load_cases, settle

SMALL_SUITE = {
    "validity_hours": 720,
    "checks": [
        {
            "check_id": f"k{k}",
            "scorer": {"name": "judge", "version": "1"},
            "dataset": {"name": "four", "version": "1"},
            "aggregation": {"method": "pass_rate", "threshold": 0.5},
        }
        for k in range(3)
    ],
}


async def issue_reports(base: str, headers: dict[str, str], db_url: str, count: int) -> list[str]:
    """`count` 1 M-case gate reports of one subject (each supersedes the one before), each
    with its own failures (seeded), in the order issued."""
    subject = "sha1:" + uuid.uuid4().hex + "00000000"
    ids = []
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=900) as client:
        await define(client, headers)
        for seed in range(1, count + 1):
            started = await client.post(
                "/api/v1/evaluations",
                json={
                    "subject": {"digest": subject},
                    "suite": {"name": "big"},
                    "mode": "gate",
                    "execution_mode": "platform",
                },
            )
            evaluation_id = started.json()["evaluation_id"]
            await load_cases(db_url, evaluation_id, seed)
            finished = await client.post(f"/api/v1/evaluations/{evaluation_id}/finish")
            assert finished.status_code == 201, finished.text[:300]
            ids.append(finished.json()["report_id"])
    await settle(db_url)
    return ids


async def issue_history(base: str, headers: dict[str, str], reports: int) -> None:
    """`reports` small gate reports of the suite `hist` (setup, not timed)."""
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as client:
        examples = [{"id": f"e{i}", "body": {"q": i}, "tags": []} for i in range(4)]
        await client.put("/api/v1/datasets/four/versions/1", json={"examples": examples})
        answer = await client.put("/api/v1/suites/hist/versions/1", json=SMALL_SUITE)
        assert answer.status_code in (200, 201), answer.text
        lanes = asyncio.Semaphore(8)

        async def one(i: int) -> None:
            async with lanes:
                started = await client.post(
                    "/api/v1/evaluations",
                    json={
                        "subject": {"digest": f"sha1:{i:040x}"},
                        "suite": {"name": "hist"},
                        "mode": "gate",
                        "execution_mode": "platform",
                    },
                )
                url = f"/api/v1/evaluations/{started.json()['evaluation_id']}"
                cases = [
                    {
                        "check_id": f"k{k}",
                        "example_id": f"e{e}",
                        "repeat": 0,
                        "status": "pass" if (i + e + k) % 5 else "fail",
                    }
                    for k in range(3)
                    for e in range(4)
                ]
                await client.post(url + "/cases", json={"cases": cases})
                finished = await client.post(url + "/finish")
                assert finished.status_code == 201, finished.text[:300]

        await asyncio.gather(*map(one, range(reports)))


async def four_connection_copy(
    db_url: str, evaluations: list[uuid.UUID], checks: list[str]
) -> None:
    """Both reports' narrow columns by COPY on 4 connections at once (the service's
    READ_STREAMS): the issue-56 ceiling of a cold diff."""
    from app.repositories.case_diffs import NARROW_SQL

    work = [(e, c) for c in checks for e in evaluations]
    connections = [await asyncpg.connect(to_plain_url(db_url)) for _ in range(4)]

    async def drain(connection: asyncpg.Connection) -> None:
        async def drop(chunk: bytes) -> None:
            del chunk

        while work:
            evaluation_id, check = work.pop()
            await connection.copy_from_query(
                NARROW_SQL, evaluation_id, check, output=drop, format="binary"
            )

    try:
        await asyncio.gather(*map(drain, connections))
    finally:
        for connection in connections:
            await connection.close()


async def evaluation_of(db_url: str, report_ids: list[str]) -> dict[str, uuid.UUID]:
    """Each report's evaluation id."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        return {
            r: await connection.fetchval(
                "SELECT evaluation_id FROM reports WHERE id = $1", uuid.UUID(r)
            )
            for r in report_ids
        }
    finally:
        await connection.close()


def cold_rounds(
    api: httpx.Client, db_url: str, ids: list[str], rounds: int
) -> tuple[list[float], list[float]]:
    """Cold diffs (each a pair not diffed before) alternated with the ceiling, the narrow COPY
    of the same pair on 4 connections (the ceiling first in every other round): the diffs'
    and the ceiling's milliseconds, round by round."""
    evaluations = asyncio.run(evaluation_of(db_url, ids))
    pairs = [(a, b) for a in reversed(ids) for b in reversed(ids) if a != b]
    assert rounds <= len(pairs), f"{len(ids)} reports give {len(pairs)} cold pairs"
    checks = [f"c{c:02d}" for c in range(20)]
    diffs, ceilings = [], []
    for round_, (after, before) in enumerate(pairs[:rounds]):
        for side in ("diff", "ceiling")[:: -1 if round_ % 2 else 1]:
            if side == "diff":
                diffs.append(timed(api, f"/evaluations/api/reports/{after}/diff/{before}", 1)[0])
                continue
            started = time.perf_counter()
            pair = [evaluations[after], evaluations[before]]
            asyncio.run(four_connection_copy(db_url, pair, checks))
            ceilings.append((time.perf_counter() - started) * 1000)
    return diffs, ceilings


async def raw_reads(db_url: str, after: str, before: str) -> tuple[float, float, float]:
    """The baselines: reading both reports' narrow columns by COPY with asyncpg on one
    connection, and running the changed-cases join counting rows, in seconds."""
    from app.repositories.case_diffs import CHANGED_SQL, NARROW_SQL

    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        evaluations = [
            await connection.fetchval(
                "SELECT evaluation_id FROM reports WHERE id = $1", uuid.UUID(r)
            )
            for r in (after, before)
        ]
        checks = [f"c{c:02d}" for c in range(20)]

        async def drop(chunk: bytes) -> None:
            del chunk

        started = time.perf_counter()
        for evaluation_id in evaluations:
            for check in checks:
                await connection.copy_from_query(
                    NARROW_SQL, evaluation_id, check, output=drop, format="binary"
                )
        copied = time.perf_counter() - started
        started = time.perf_counter()
        await four_connection_copy(db_url, evaluations, checks)
        copied_four = time.perf_counter() - started
        started = time.perf_counter()
        for check in checks:
            await connection.fetchval(
                f"SELECT count(*) FROM ({CHANGED_SQL}) j", *evaluations, check
            )
        joined = time.perf_counter() - started
        return copied, joined, copied_four
    finally:
        await connection.close()


def timed(http: httpx.Client, url: str, runs: int, **params: str) -> list[float]:
    """Milliseconds of `runs` sequential GETs."""
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        answer = http.get(url, params=params or None)
        out.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
    return out


def p(values: list[float], q: float) -> float:
    """A percentile of `values`."""
    return float(np.percentile(values, q))


def sign_in(base: str, token: str) -> httpx.Client:
    """A client holding a page session."""
    http = httpx.Client(base_url=base, timeout=120)
    form = http.get("/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    answer = http.post("/signin", data={"csrf": csrf.group(1), "token": token, "next": "/reports"})
    assert answer.status_code == 303, answer.text[:300]
    return http


def main() -> None:
    """Run the scenarios and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--history", type=int, default=1000, help="history reports to issue")
    parser.add_argument("--reports", type=int, default=3, help="1 M-case reports to issue")
    parser.add_argument("--cold-rounds", type=int, default=4, help="cold diffs, each a new pair")
    args = parser.parse_args()
    db_url = database_url()
    migrate(db_url)
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as data, served(db_url, Path(data)) as (base, process):
        token = os.environ["BENCH_TOKEN"]
        headers = {"Authorization": f"Bearer {token}"}
        started = time.perf_counter()
        ids = asyncio.run(issue_reports(base, headers, db_url, args.reports))
        after, before = ids[-1], ids[-2]
        asyncio.run(issue_history(base, headers, args.history))
        print(f"setup: {time.perf_counter() - started:.0f} s")
        api = httpx.Client(base_url=base, headers=headers, timeout=600)
        url = f"/evaluations/api/reports/{after}/diff/{before}"
        copied, joined, _ = asyncio.run(raw_reads(db_url, after, before))
        with PeakRss(process) as rss:
            diffs, ceilings = cold_rounds(api, db_url, ids, args.cold_rounds)
        ratios = [c / d for c, d in zip(ceilings, diffs, strict=True)]
        warm = timed(api, url, 20)
        transitions = api.get(url).json()["checks"][0]["transitions"]
        rows.append(
            [
                f"diff summary, 2 x 1 M cases, cold (computed), {len(diffs)} pairs",
                " ".join(f"{d:.0f}" for d in diffs) + f" ms, median {statistics.median(diffs):.0f}",
                f"{2_000_000 / statistics.median(diffs) * 1000:,.0f} cases/s",
                f"peak RSS growth {rss.growth_mb:.0f} MB",
                "< 1 s",
            ]
        )
        rows.append(
            [
                "baseline: COPY of the same columns, one connection, no arithmetic",
                f"{copied * 1000:.0f} ms",
                f"ratio of the median cold diff to it: "
                f"{statistics.median(diffs) / 1000 / copied:.2f}",
                "-",
                "-",
            ]
        )
        rows.append(
            [
                "ceiling (issue 56): the same COPY on 4 connections, alternated with the diffs",
                " ".join(f"{c:.0f}" for c in ceilings) + " ms",
                "ratio of it to the cold diff, per round: " + " ".join(f"{r:.2f}" for r in ratios),
                "-",
                "-",
            ]
        )
        rows.append(
            [
                "diff summary, warm (kept)",
                f"p50 {p(warm, 50):.1f} ms, p99 {p(warm, 99):.1f} ms",
                "-",
                f"{len(api.get(url).content) / 1e3:.0f} kB answer",
                "< 1 s",
            ]
        )
        pages: list[float] = []
        cursor = None
        for _ in range(200):
            params = {"check": "c00", "transition": "fail-pass", "limit": "100"}
            if cursor:
                params["cursor"] = cursor
            started = time.perf_counter()
            page = api.get(url, params=params).json()
            pages.append((time.perf_counter() - started) * 1000)
            cursor = page["next_cursor"]
        rows.append(
            [
                "a page of 100 example ids (fail -> pass, walking cursors)",
                f"p50 {p(pages, 50):.1f} ms, p99 {p(pages, 99):.1f} ms",
                f"{page['count']:,} examples in the transition",
                "-",
                "< 50 ms",
            ]
        )
        with PeakRss(process) as rss:
            started = time.perf_counter()
            lines = 0
            with api.stream("GET", url + ".ndjson") as stream:
                for line in stream.iter_lines():
                    lines += bool(line)
            seconds = time.perf_counter() - started
        rows.append(
            [
                "NDJSON of changed cases",
                f"{seconds:.2f} s",
                f"{1_000_000 / seconds:,.0f} case pairs/s; {lines / seconds:,.0f} lines/s",
                f"{lines:,} lines; peak RSS growth {rss.growth_mb:.0f} MB",
                ">= 200,000 cases/s",
            ]
        )
        rows.append(
            [
                "baseline: the same join counted in PostgreSQL (no rows sent)",
                f"{joined:.2f} s",
                f"ratio of the stream to it: {seconds / joined:.2f}",
                "-",
                "-",
            ]
        )
        browser = sign_in(base, token)
        check_url = f"/reports/{after}/checks/c07"
        first = timed(browser, check_url, 50)
        middle = timed(browser, check_url, 50, cursor=case_cursor("ex05000", 4))
        failed = timed(browser, check_url, 50, status="fail")
        one = timed(browser, check_url, 50, example="ex09999")
        for name, values in (
            ("first page", first),
            ("a page from ex05000 (cursor)", middle),
            ("status = fail", failed),
            ("one example", one),
        ):
            rows.append(
                [
                    f"a check's cases page (50 cases of 50,000), {name}",
                    f"p50 {p(values, 50):.1f} ms, p99 {p(values, 99):.1f} ms",
                    "-",
                    "-",
                    "< 100 ms",
                ]
            )
        # The comparison page (the diff kept): 20 checks, each with its regressions and fixes
        # and their repeats before and after, read for both reports (issue 49).
        compared = timed(browser, f"/reports/{after}/compare/{before}", 20)
        side_by_side = timed(browser, f"/reports/{after}/examples/ex00001", 20, against=before)
        alone = timed(browser, f"/reports/{after}/examples/ex00001", 20)
        for name, values, target in (
            ("the comparison page, 20 checks, rows with both sides' repeats", compared, "< 1 s"),
            ("an example page, 20 checks x 5 repeats", alone, "< 100 ms"),
            (
                "the same example page beside the report before (?against=)",
                side_by_side,
                "< 100 ms",
            ),
        ):
            rows.append(
                [
                    name,
                    f"p50 {p(values, 50):.1f} ms, p99 {p(values, 99):.1f} ms",
                    "-",
                    f"{len(browser.get(f'/reports/{after}/compare/{before}').content) / 1e3:.0f} kB"
                    if values is compared
                    else "-",
                    target,
                ]
            )
        history_api = timed(api, "/evaluations/api/suites/hist/history", 20, limit="1000")
        history_page = timed(browser, "/suites/hist/history", 20, limit="1000")
        for name, values in (
            (f"history API, {args.history:,} reports", history_api),
            (f"history page, {args.history:,} reports, 3 trends", history_page),
        ):
            rows.append(
                [
                    name,
                    f"p50 {p(values, 50):.1f} ms, p99 {p(values, 99):.1f} ms",
                    f"mean {statistics.mean(values):.1f} ms",
                    "-",
                    "< 200 ms",
                ]
            )
        print(f"c00 transitions: { {k: v for k, v in transitions.items() if v} }")
    print(table(["measure", "time", "throughput", "size / memory", "target"], rows))
    print(load_note())


if __name__ == "__main__":
    main()
