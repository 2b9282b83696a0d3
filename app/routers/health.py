"""Liveness, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from app.errors import ServiceUnavailable
from app.storage import ObjectStoreUnavailable

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a dependency is unreachable"}})
async def readyz(request: Request) -> dict[str, str]:
    """The database and the object store answer."""
    try:
        async with request.app.state.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except Exception as exc:
        raise ServiceUnavailable(f"the database does not answer: {type(exc).__name__}") from exc
    try:
        await request.app.state.object_store.ping()
    except ObjectStoreUnavailable as exc:
        raise ServiceUnavailable("the object store does not answer") from exc
    return {"status": "ready", "database": "ok", "object_store": "ok"}


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus text format."""
    data = generate_latest(request.app.state.metrics.registry)
    return Response(content=data, media_type=CONTENT_TYPE_LATEST)
