"""Whether another checkout (B) exports what this tree (A) exports, byte for byte: both serve
one database with the same public base URL; reports issued through A are read (GET report)
and exported as bundles by each. A bundle's header carries the time it was exported (and its
trailer the digest of what came before), so those are left out; every other line must match.

    git worktree add /tmp/before <commit>
    python -m bench.same_exports --baseline-tree /tmp/before

Exits 1 when anything differs (naming the line and field).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import sys
import tempfile
from pathlib import Path

import httpx
import orjson

from app.platform.db import migrate
from bench.common import admin_token, database_url, served
from bench.diffs import issue_history
from bench.pages import B_ENV, _define

PUBLIC = {"EVALBOOK_PUBLIC_BASE_URL": "https://evalbook.example"}
REPORTS = "/evaluations/api/reports"


def _exported(base: str, headers: dict[str, str], report_id: str) -> tuple[bytes, list[bytes]]:
    """(GET report's bytes, the bundle's lines but the trailer, the header without its time)."""
    read = httpx.get(f"{base}{REPORTS}/{report_id}", headers=headers).content
    made = httpx.post(
        f"{base}{REPORTS}/bundle", json={"report_id": report_id}, headers=headers, timeout=60
    )
    made.raise_for_status()
    content = httpx.get(
        f"{base}{REPORTS}/bundles/{made.json()['bundle_id']}/content", headers=headers, timeout=60
    ).content
    lines = gzip.decompress(content).splitlines()
    header = orjson.loads(lines[0])
    header.pop("created_at")
    return read, [orjson.dumps(header, option=orjson.OPT_SORT_KEYS), *lines[1:-1]]


def _differences(a: list[bytes], b: list[bytes]) -> list[str]:
    if len(a) != len(b):
        return [f"{len(a)} lines against {len(b)}"]
    found = []
    for number, (x, y) in enumerate(zip(a, b, strict=True), start=1):
        if x != y:
            left, right = orjson.loads(x), orjson.loads(y)
            fields = sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))
            found.append(f"line {number} ({left.get('kind')}): {', '.join(fields)}")
    return found


def main() -> int:
    """Issue, export through both, compare; print what differs."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline-tree", type=Path, required=True, help="checkout B")
    parser.add_argument("--reports", type=int, default=3, help="reports to issue and export")
    args = parser.parse_args()
    db_url = database_url()
    migrate(db_url)
    token = admin_token(db_url)
    headers = {"Authorization": f"Bearer {token}"}
    b_env = {**B_ENV, **PUBLIC}
    tree = args.baseline_tree.resolve()
    with (
        tempfile.TemporaryDirectory() as data_dir,
        served(db_url, Path(data_dir), env_extra=PUBLIC, token=token) as (a, _),
        served(db_url, Path(data_dir), env_extra=b_env, tree=tree, token=token) as (b, _),
    ):
        asyncio.run(_define(a, headers))
        asyncio.run(issue_history(a, headers, args.reports))
        listed = httpx.get(
            f"{a}{REPORTS}", params={"suite": "hist", "limit": args.reports}, headers=headers
        ).json()["reports"]
        failed = False
        for report in listed:
            report_id = report["report_id"]
            (read_a, lines_a), (read_b, lines_b) = (
                _exported(s, headers, report_id) for s in (a, b)
            )
            found = _differences(lines_a, lines_b)
            same_read = read_a == read_b
            failed = failed or bool(found) or not same_read
            print(
                f"{report_id}: GET report {'identical' if same_read else 'DIFFERS'}; "
                f"{len(lines_a)} bundle lines " + ("identical" if not found else "; ".join(found))
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
