"""The pages a newcomer reads, this tree (A) against another checkout (B) in the same run:
both serve one database, and each measure alternates A and B over several rounds (B first in
every other round), so load and caches fall on both alike. Prints each page's p50 for A and B,
the ratio A / B, and the load.

Setup (not timed): 1,000 small gate reports of one suite (3 checks x 4 examples), issued
through A. Measured: the reports list, the reports list searched by subject (A only: B has no
such filter), a report page, the comparison page of two of those reports, an example page (and
beside the report before, A only), the suite's history page and its API.

    git worktree add /tmp/before <commit>
    python -m bench.pages --baseline-tree /tmp/before
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from app.platform.db import migrate
from bench.common import admin_token, database_url, load_note, served, table
from bench.diffs import issue_history, sign_in, timed
from bench.ingest import define
from bench.lists import settle


async def _define(base: str, headers: dict[str, str]) -> None:
    """The judge scorer the history suite names (with a small dataset of its own)."""
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        await define(client, headers, "small", [f"x{i}" for i in range(4)])


# B reads only: the schema and the keys are A's (it starts with the active key's file in the
# data directory they share).
B_ENV = {"EVALBOOK_MIGRATE_ON_START": "false"}


def main() -> None:
    """Set up, measure A and B alternately, print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline-tree", type=Path, required=True, help="checkout B")
    parser.add_argument("--reports", type=int, default=1000, help="history reports to issue")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of A and B")
    parser.add_argument("--runs", type=int, default=20, help="requests a measure a round")
    args = parser.parse_args()
    db_url = database_url()
    migrate(db_url)
    token = admin_token(db_url)
    tree = args.baseline_tree.resolve()
    headers = {"Authorization": f"Bearer {token}"}
    # One data directory: B signs nothing here, but starts only with the active key's file.
    with (
        tempfile.TemporaryDirectory() as data_dir,
        served(db_url, Path(data_dir), token=token) as (a_base, _),
        served(db_url, Path(data_dir), env_extra=B_ENV, tree=tree, token=token) as (b_base, _),
    ):
        started = time.perf_counter()
        asyncio.run(_define(a_base, headers))
        asyncio.run(issue_history(a_base, headers, args.reports))
        # A steady state before any measure: the tables analyzed, the load checkpointed, and
        # the background work the 1,000 reports started in A (log cuts, the sweep) done.
        asyncio.run(settle(db_url))
        time.sleep(15)
        print(f"setup: {time.perf_counter() - started:.0f} s")
        api = httpx.Client(base_url=a_base, headers=headers, timeout=120)
        listed = api.get("/evaluations/api/reports", params={"suite": "hist", "limit": 2}).json()
        after, before = (r["report_id"] for r in listed["reports"])
        clients = {"A": sign_in(a_base, token), "B": sign_in(b_base, token)}
        apis = {
            "A": api,
            "B": httpx.Client(base_url=b_base, headers=headers, timeout=120),
        }
        measures: list[tuple[str, str, dict[str, str], bool, bool]] = [
            ("the reports list (25 a page)", "/reports", {}, False, True),
            ("the reports list searched by subject", "/reports", {"subject": "0000000001"}, False, False),
            ("a report page", f"/reports/{after}", {}, False, True),
            ("the comparison page of two reports", f"/reports/{after}/compare/{before}", {}, False, True),
            ("an example page", f"/reports/{after}/examples/e1", {}, False, True),
            ("an example page beside the report before", f"/reports/{after}/examples/e1", {"against": before}, False, False),
            (f"the history page, {args.reports:,} reports", "/suites/hist/history", {"limit": "1000"}, False, True),
            (f"the history API, {args.reports:,} reports", "/evaluations/api/suites/hist/history", {"limit": "1000"}, True, True),
        ]  # fmt: skip
        rows: list[list[object]] = []
        for name, path, params, is_api, both in measures:
            p50: dict[str, list[float]] = {"A": [], "B": []}
            for round_ in range(args.rounds):
                order = ("A", "B") if round_ % 2 == 0 else ("B", "A")
                for side in order if both else ("A",):
                    http = apis[side] if is_api else clients[side]
                    timed(http, path, 3, **params)  # warm
                    p50[side].append(statistics.median(timed(http, path, args.runs, **params)))
            a = statistics.median(p50["A"])
            b = statistics.median(p50["B"]) if p50["B"] else None
            size = len(clients["A"].get(path, params=params).content) if not is_api else 0
            rows.append(
                [
                    name,
                    f"{a:.1f} ms",
                    "-" if b is None else f"{b:.1f} ms",
                    "-" if b is None else f"{a / b:.2f}",
                    f"{size / 1e3:,.0f} kB" if size else "-",
                ]
            )
    print(table(["page (p50, median of rounds)", "A (this tree)", "B", "A / B", "HTML"], rows))
    print(load_note())


if __name__ == "__main__":
    main()
