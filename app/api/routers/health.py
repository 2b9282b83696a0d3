"""Liveness, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.api.deps import AppMetrics, State
from app.api.routers.route import EdgeRoute
from app.schemas.problems import problems
from app.services import health as service

router = APIRouter(tags=["operations"], route_class=EdgeRoute, responses=problems(500))


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses=problems(503))
async def readyz(state: State) -> dict[str, str]:
    """The database and the object store answer."""
    return await service.readiness(
        state.engine,
        state.reader_pool,
        state.object_store,
        state.settings.readiness_timeout_seconds,
    )


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
)
async def metrics(collectors: AppMetrics) -> Response:
    """Prometheus text format."""
    return Response(content=generate_latest(collectors.registry), media_type=CONTENT_TYPE_LATEST)
