"""The baseline of the read benchmarks: a minimal Starlette + asyncpg app answering GET report
with the service's own query (report and envelope, open incidents), no authentication, the
stored body returned as it is; and a report list with the service's own list query, the stored
bodies joined into one JSON array, or with `view=summary` the list's columns without bodies
(the floor of what a list can cost on this machine)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.repositories.reads import LIST_FILTERS, REPORT_SQL, list_sql

PROJECT = uuid.UUID(os.environ["MINIMAL_PROJECT_ID"])
pool: asyncpg.Pool | None = None


async def report(request: Request) -> Response:
    """One report's stored body, or 404."""
    assert pool is not None
    async with pool.acquire() as connection:
        row = await connection.fetchrow(
            REPORT_SQL, uuid.UUID(request.path_params["report_id"]), PROJECT
        )
    if row is None:
        return Response(status_code=404)
    return Response(row["body"], media_type="application/json")


async def report_list(request: Request) -> Response:
    """The newest reports matching the query's filters, their stored bodies as one array."""
    assert pool is not None
    names = tuple(name for name in LIST_FILTERS if name in request.query_params)
    limit = int(request.query_params.get("limit", "50"))
    summary = request.query_params.get("view") == "summary"
    async with pool.acquire() as connection:
        rows = await connection.fetch(
            list_sql(names, False, not summary),
            PROJECT,
            *(request.query_params[name] for name in names),
            limit + 1,
        )
    if summary:
        fields = ("id", "digest", "issued_at", "result", "subject_digest", "mode", "status")
        items = [{f: str(row[f]) for f in fields} for row in rows[:limit]]
        return Response(orjson.dumps(items))
    return Response(b"[" + b",".join(row["body"] for row in rows[:limit]) + b"]")


@asynccontextmanager
async def lifespan(_: Starlette) -> AsyncIterator[None]:
    """The pool, as large as the service's read pool."""
    global pool
    pool = await asyncpg.create_pool(os.environ["MINIMAL_DATABASE_URL"], min_size=2, max_size=20)
    yield
    await pool.close()


app = Starlette(
    routes=[Route("/reports", report_list), Route("/reports/{report_id}", report)],
    lifespan=lifespan,
)
