"""Large cases trees recomputed apart from the service's interpreter, by this module run as a
program (`python -m app.services.tree_verifying`, app/services/kit/apart.py).

Hashing a million leaves holds the interpreter for seconds, on the event loop or in a thread
alike, and every request the process serves meanwhile waits for it at each round trip (a
read's p99 rose from 17 to 67-87 ms beside the sweep of a million-case report). The program
reads the trees over a connection of its own, in a read-only transaction, with the very
`case_integrity.tree_findings` the service runs, and answers their findings. One program serves
all of a report's large trees: starting it costs about 0.9 s of CPU (its imports).

Request (JSON on standard input): the database address, the statement timeout, and a list of
`{"tree": CommittedTree's fields, "scorer_digests": {...}}`. Answer (JSON on standard output):
for each tree, its findings as `[part, detail]` pairs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
from asyncio import Future
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool

from app.platform.memory import keep_heap_top
from app.repositories import integrity as repo
from app.services.case_integrity import CommittedTree, Finding, tree_findings
from app.services.kit.apart import ApartFailed, run_apart

logger = logging.getLogger(__name__)

PROGRAM = "app.services.tree_verifying"
# While the program works, the caller's transaction sends a statement this often, so that
# PostgreSQL's idle-in-transaction timeout does not end it.
KEEP_ALIVE_SECONDS = 15.0

NICENESS = 10
GC_GEN0_THRESHOLD = 50_000

Digests = Mapping[str, str | None]


async def trees_findings_apart(
    session: AsyncSession, trees: list[tuple[CommittedTree, Digests]]
) -> list[list[Finding]]:
    """Each tree's `tree_findings`, computed by the program; here, one by one, if it fails."""
    if not trees:
        return []
    request = {
        "database_url": await repo.database_url(session),
        "statement_timeout": await repo.statement_timeout(session),
        "trees": [
            {"tree": asdict(tree), "scorer_digests": dict(digests)} for tree, digests in trees
        ],
    }
    work: Future[bytes] = asyncio.ensure_future(run_apart(PROGRAM, orjson.dumps(request)))
    try:
        while not (await asyncio.wait({work}, timeout=KEEP_ALIVE_SECONDS))[0]:
            await repo.keep_alive(session)
        answer = orjson.loads(work.result())
        if len(answer) != len(trees):
            raise ValueError(f"{len(answer)} answers for {len(trees)} trees")
        return [[Finding(str(part), str(detail)) for part, detail in one] for one in answer]
    except (ApartFailed, orjson.JSONDecodeError, TypeError, ValueError) as exc:
        logger.warning("verifying %d trees apart failed (%s); verifying them here", len(trees), exc)
        return [await tree_findings(session, tree, digests) for tree, digests in trees]
    finally:
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, ApartFailed):
                await work


async def answer(request: dict[str, Any]) -> list[list[Finding]]:
    """The findings of the request's trees, read over a connection of this program's own."""
    engine = create_async_engine(
        request["database_url"],
        poolclass=NullPool,
        connect_args={
            "server_settings": {
                "statement_timeout": request["statement_timeout"],
                "application_name": "evalbook-verify",
            }
        },
    )
    try:
        async with AsyncSession(engine) as session, session.begin():
            await repo.read_only(session)
            return [
                await tree_findings(session, CommittedTree(**one["tree"]), one["scorer_digests"])
                for one in request["trees"]
            ]
    finally:
        await engine.dispose()


def main() -> None:
    """Answer the request on standard input, yielding the cores to the service's requests."""
    # Background work: with the cores busy, requests (the service, its database) go first.
    os.nice(NICENESS)
    # The service's own settings for millions of short-lived rows (app/api/main.py): the
    # cyclic collector leaves the imports alone and runs rarely, and freed heap is kept.
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, 20, 50)
    keep_heap_top()
    found = asyncio.run(answer(orjson.loads(sys.stdin.buffer.read())))
    pairs = [[[finding.part, finding.detail] for finding in one] for one in found]
    sys.stdout.buffer.write(orjson.dumps(pairs))


if __name__ == "__main__":
    main()
