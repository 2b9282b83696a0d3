"""The baseline of the read benchmarks: a minimal Starlette + asyncpg app answering GET report
with the service's own query (report and envelope, open incidents), no authentication, the
stored body returned as it is."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.repositories.reads import REPORT_SQL

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


@asynccontextmanager
async def lifespan(_: Starlette) -> AsyncIterator[None]:
    """The pool, as large as the service's read pool."""
    global pool
    pool = await asyncpg.create_pool(os.environ["MINIMAL_DATABASE_URL"], min_size=2, max_size=20)
    yield
    await pool.close()


app = Starlette(routes=[Route("/reports/{report_id}", report)], lifespan=lifespan)
