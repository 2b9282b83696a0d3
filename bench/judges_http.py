"""A judged check at a million examples over HTTP (issue 51), against `evalbook serve`.

One pass_rate check over 1,000,000 examples, its cases sent as NDJSON (20,000 a request, two at
a time). B: the check unjudged. A: the same check judged (calibration, label_fraction 0.1),
with the ~100,000 labels of its sample posted as NDJSON by a labeller token before the finish.
A and B alternate over `--rounds` rounds, each into emptied case and label tables. Timed:

- the finish of A against B's (target: A / B <= 1.2);
- label ingest, labels per second over the whole post (target >= 50,000/s);
- the requested-labels page (100 examples with input and output, as a reader with
  dataset.read_body sees it), the first page and one deep in the sample through its cursor,
  20 times each after the labels (target < 100 ms).

Prints every run, /proc/loadavg before each, and the medians with their ratios and targets.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx
import orjson

from app.domain.labels import sampled_ids
from app.platform.config import to_plain_url
from app.platform.db import migrate
from bench.common import database_url, load_note, served, start_gate, table
from bench.measures import loadavg

EXAMPLES = 1_000_000
FRACTION = 0.1
BATCH = 20_000
CALIBRATION = {"method": "ppi", "label_fraction": FRACTION, "min_labels": 30, "sample_seed": "big"}
PAGE_READS = 20


def example_ids() -> list[str]:
    """The million example ids."""
    return [f"ex{i:07d}" for i in range(EXAMPLES)]


def suite_body(judged: bool) -> dict[str, object]:
    """The one pass_rate check, judged or not."""
    check: dict[str, object] = {
        "check_id": "accuracy",
        "scorer": {"name": "judge", "version": "1"},
        "dataset": {"name": "big", "version": "1"},
        "aggregation": {"method": "pass_rate", "threshold": 0.5},
    }
    if judged:
        check["calibration"] = CALIBRATION
    return {"validity_hours": 24, "checks": [check]}


async def define(base: str, headers: dict[str, str]) -> str:
    """The scorer, the million-example dataset, both suites; a labeller token."""
    async with httpx.AsyncClient(base_url=base, timeout=900) as client:
        r = await client.put(
            "/api/v1/scorers/judge/versions/1", json={"definition": {"k": "j"}}, headers=headers
        )
        assert r.status_code in (200, 201), r.text
        body = b"".join(orjson.dumps({"id": e, "body": {"q": e}}) + b"\n" for e in example_ids())
        r = await client.put(
            "/api/v1/datasets/big/versions/1",
            content=body,
            headers={**headers, "Content-Type": "application/x-ndjson"},
        )
        assert r.status_code in (200, 201), r.text
        for name, judged in (("plain", False), ("judged", True)):
            r = await client.put(
                f"/api/v1/suites/{name}/versions/1", json=suite_body(judged), headers=headers
            )
            assert r.status_code in (200, 201), r.text
        r = await client.post(
            "/api/v1/tokens",
            json={"name": "labeller", "permissions": ["label.write"], "kind": "labeller"},
            headers=headers,
        )
        assert r.status_code == 201, r.text
        token: str = r.json()["token"]
        return token


def case_bodies() -> list[bytes]:
    """The million cases as NDJSON requests: the judge passes about 70 %."""
    lines = [
        orjson.dumps(
            {
                "check_id": "accuracy",
                "example_id": e,
                "repeat": 0,
                "status": "pass" if (i * 7919) % 10 < 7 else "fail",
                "output": {"a": i % 97},
            }
        )
        for i, e in enumerate(example_ids())
    ]
    return [b"\n".join(lines[i : i + BATCH]) + b"\n" for i in range(0, len(lines), BATCH)]


def label_bodies() -> tuple[list[bytes], int]:
    """The sample's labels as NDJSON requests (people fail a tenth of what the judge passed)."""
    chosen = sampled_ids(CALIBRATION, "accuracy", example_ids())
    lines = [
        orjson.dumps(
            {
                "check_id": "accuracy",
                "example_id": e,
                "label": "fail" if int(e[2:]) % 10 == 0 else "pass",
                "labeller": "ana",
            }
        )
        for e in chosen
    ]
    bodies = [b"\n".join(lines[i : i + BATCH]) + b"\n" for i in range(0, len(lines), BATCH)]
    return bodies, len(lines)


async def clear(db_url: str) -> None:
    """Empty the case and label tables (their triggers refuse TRUNCATE; the bench owns its
    database) and checkpoint."""
    connection = await asyncpg.connect(to_plain_url(db_url))
    try:
        await connection.execute("SET session_replication_role = replica")
        await connection.execute("TRUNCATE cases, case_outputs, labels")
        await connection.execute("CHECKPOINT")
    finally:
        await connection.close()


async def post_all(
    client: httpx.AsyncClient, path: str, bodies: list[bytes], headers: dict[str, str]
) -> float:
    """Post every body, two at a time; the seconds it took."""
    queue = list(bodies)
    nd = {**headers, "Content-Type": "application/x-ndjson"}

    async def worker() -> None:
        while queue:
            response = await client.post(path, content=queue.pop(0), headers=nd)
            assert response.status_code == 200, response.text[:500]

    started = time.perf_counter()
    await asyncio.gather(worker(), worker())
    return time.perf_counter() - started


async def page_times(
    client: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> tuple[list[float], list[float]]:
    """The first requested page's times and a deep page's (its cursor found first), in s."""
    first = await client.get(path, params={"limit": 100}, headers=headers)
    assert first.status_code == 200, first.text[:500]
    cursor = first.json()["next_cursor"]
    for _ in range(400):  # 400 pages of 100 in: 40 % of the way through the sample
        page = await client.get(path, params={"limit": 100, "cursor": cursor}, headers=headers)
        cursor = page.json()["next_cursor"]
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(PAGE_READS):
        for into, params in (
            (times[0], {"limit": 100}),
            (times[1], {"limit": 100, "cursor": cursor}),
        ):
            started = time.perf_counter()
            response = await client.get(path, params=params, headers=headers)
            into.append(time.perf_counter() - started)
            assert response.status_code == 200 and response.json()["requested"][0]["input"]
    return times


async def run(
    base: str, headers: dict[str, str], labeller: dict[str, str], judged: bool, data: dict
) -> dict[str, object]:
    """One evaluation: its cases, (judged) its labels and pages, its finish."""
    async with httpx.AsyncClient(base_url=base, timeout=900) as client:
        evaluation_id = await start_gate(client, headers, "judged" if judged else "plain")
        url = f"/api/v1/evaluations/{evaluation_id}"
        ingest = await post_all(client, f"{url}/cases", data["cases"], headers)
        found: dict[str, object] = {"ingest": ingest}
        if judged:
            found["labels"] = await post_all(client, f"{url}/labels", data["labels"], labeller)
            found["pages"] = await page_times(client, f"{url}/labels/requested", headers)
        started = time.perf_counter()
        done = await client.post(f"{url}/finish", headers=headers)
        found["finish"] = time.perf_counter() - started
        assert done.status_code == 201, done.text[:500]
        check = done.json()["body"]["checks"][0]
        found["check"] = f"{check['score']:.4f} ({check['status']})"
        return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    url = database_url()
    migrate(url)
    labels, label_count = label_bodies()
    data = {"cases": case_bodies(), "labels": labels}
    runs: dict[bool, list[dict[str, object]]] = {False: [], True: []}
    rows = []
    with served(url, Path(tempfile.mkdtemp())) as (base, _):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        labeller = {"Authorization": f"Bearer {asyncio.run(define(base, headers))}"}
        for round_ in range(1, args.rounds + 1):
            for judged in (False, True):
                asyncio.run(clear(url))
                before = loadavg()
                found = asyncio.run(run(base, headers, labeller, judged, data))
                runs[judged].append(found)
                pages = found.get("pages") or ([], [])
                rows.append(
                    [
                        f"{'A, judged' if judged else 'B, unjudged'}, round {round_}",
                        f"{found['ingest']:.2f}",
                        f"{found['finish']:.2f}",
                        f"{label_count / found['labels']:,.0f}" if judged else "-",
                        f"{statistics.median(pages[0]) * 1000:.1f}" if judged else "-",
                        f"{statistics.median(pages[1]) * 1000:.1f}" if judged else "-",
                        before,
                        found["check"],
                    ]
                )
    print(
        table(
            [
                "run",
                "ingest s",
                "finish s",
                "labels/s",
                "page 1 ms",
                "page 401 ms",
                "loadavg before",
                "score",
            ],
            rows,
        )
    )
    finish = [statistics.median(float(r["finish"]) for r in runs[j]) for j in (False, True)]
    rate = statistics.median(label_count / float(r["labels"]) for r in runs[True])
    pages = [t for r in runs[True] for t in r["pages"][0] + r["pages"][1]]  # type: ignore[operator]
    print(
        f"\nmedians: finish B {finish[0]:.2f} s, A {finish[1]:.2f} s, A / B "
        f"{finish[1] / finish[0]:.3f} (target <= 1.2); label ingest {rate:,.0f} labels/s "
        f"({label_count:,} labels; target >= 50,000); requested page median "
        f"{statistics.median(pages) * 1000:.1f} ms, slowest {max(pages) * 1000:.1f} ms "
        "(target < 100)"
    )
    print(load_note())


if __name__ == "__main__":
    main()
