"""The application factory and the lifespan that owns every resource."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import __version__
from app.auth import PrincipalCache
from app.config import Settings
from app.db import build_engine, build_sessionmaker, open_reader_pool
from app.errors import PROBLEM_MEDIA_TYPE, ProblemError, ServiceUnavailable, ValidationFailed
from app.fastlane import ReportReadFastLane
from app.metrics import Metrics, MetricsMiddleware
from app.routers import (
    bundles,
    definitions,
    evaluations,
    health,
    pages,
    peers,
    reports,
    tokens,
)
from app.schemas.definitions import DatasetVersionIn, ExampleIn, ScorerVersionIn, SuiteVersionIn
from app.schemas.evaluations import CaseBatchIn, CaseIn, EvaluationStartIn
from app.schemas.peers import PeerIn, PeerReportIn
from app.schemas.reports import VerifyIn
from app.schemas.tokens import TokenIn
from app.services.compiled import SuiteCache
from app.services.notifications import NotificationWorker
from app.services.uploads import UploadJanitor
from app.services.uploads import sweep as sweep_uploads
from app.storage import ObjectStore, ObjectStoreUnavailable
from app.storage.local import LocalObjectStore
from app.storage.s3 import S3ObjectStore

STATIC_DIR = Path(__file__).resolve().parent / "web" / "static"
logger = logging.getLogger(__name__)
HAND_READ_BODIES = (
    ScorerVersionIn,
    DatasetVersionIn,
    ExampleIn,
    SuiteVersionIn,
    EvaluationStartIn,
    CaseBatchIn,
    CaseIn,
    TokenIn,
    VerifyIn,
    PeerIn,
    PeerReportIn,
)


async def resolve_database_url(settings: Settings) -> str:
    """The configured database, or the embedded one started in the data directory."""
    if settings.database_url:
        return settings.database_url
    from app.embedded import start_embedded_postgres

    return await asyncio.to_thread(start_embedded_postgres, settings.data_dir)


async def open_object_store(settings: Settings, stack: AsyncExitStack) -> ObjectStore:
    """S3 when an endpoint or bucket is configured, else the local directory."""
    if settings.s3_endpoint_url or settings.s3_bucket:
        return await S3ObjectStore.open(settings, stack)
    store = LocalObjectStore(settings.local_object_dir)
    await store.ping()
    return store


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def problem_response(request: Request, error: ProblemError) -> JSONResponse:
    """Render a typed error as application/problem+json."""
    return JSONResponse(
        error.to_problem(request.url.path),
        status_code=error.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=error.headers,
    )


def is_unavailable(exc: BaseException) -> bool:
    """Connection-level failures (answered 503), as opposed to errors in a statement (500)."""
    original = getattr(exc, "orig", None) or exc
    if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(
        original,
        OSError
        | asyncpg.exceptions.ConnectionDoesNotExistError
        | asyncpg.exceptions.CannotConnectNowError
        | asyncpg.exceptions.TooManyConnectionsError
        | asyncpg.exceptions.InterfaceError,
    ) or isinstance(exc, OSError | sqlalchemy.exc.InterfaceError | sqlalchemy.exc.TimeoutError)


def install_error_handlers(app: FastAPI) -> None:
    """One handler for typed errors; framework and unexpected errors become problems too."""

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(part) for part in first["loc"])
        return problem_response(
            request, ValidationFailed(f"{where}: {first['msg']}", errors=errors)
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = ProblemError(str(exc.detail), headers=dict(exc.headers or {}))
        error.status = exc.status_code
        error.type_slug = f"http-{exc.status_code}"
        error.title = str(exc.detail)
        return problem_response(request, error)

    @app.exception_handler(ObjectStoreUnavailable)
    async def _store(request: Request, exc: ObjectStoreUnavailable) -> JSONResponse:
        logger.warning("object store unavailable: %s", exc)
        return problem_response(request, ServiceUnavailable("the object store is unavailable"))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        if is_unavailable(exc):
            logger.warning("dependency unavailable: %r", exc)
            return problem_response(request, ServiceUnavailable("the database is unavailable"))
        logger.exception("unexpected error")
        return problem_response(request, ProblemError("an unexpected error occurred"))


def install_openapi(app: FastAPI) -> None:
    """Add the hand-read request bodies' schemas to the OpenAPI components."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in HAND_READ_BODIES:
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(model_schema.pop("$defs", {}))
            components[model.__name__] = model_schema
        components["Problem"] = {
            "type": "object",
            "description": "RFC 9457 problem details",
            "properties": {
                "type": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "integer"},
                "detail": {"type": "string"},
                "instance": {"type": "string"},
                "errors": {"type": "array", "items": {"type": "object"}},
                "index": {"type": "integer"},
            },
            "required": ["type", "title", "status", "detail", "instance"],
        }
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                responses = operation.setdefault("responses", {})
                responses.pop("422", None)
                for code, text in (
                    ("401", "no valid token"),
                    ("403", "missing permission"),
                    ("404", "unknown id or another project"),
                    ("422", "validation failed"),
                ):
                    responses.setdefault(
                        code,
                        {
                            "description": text,
                            "content": {
                                PROBLEM_MEDIA_TYPE: {
                                    "schema": {"$ref": "#/components/schemas/Problem"}
                                }
                            },
                        },
                    )
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application; resources are opened by the lifespan, not here."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            database_url = await resolve_database_url(settings)
            engine = build_engine(settings, database_url)
            stack.push_async_callback(engine.dispose)
            app.state.engine = engine
            app.state.sessionmaker = build_sessionmaker(engine)
            app.state.reader_pool = await open_reader_pool(settings, database_url)
            stack.push_async_callback(app.state.reader_pool.close)
            app.state.object_store = await open_object_store(settings, stack)
            app.state.http = await stack.enter_async_context(
                httpx.AsyncClient(timeout=httpx.Timeout(10.0), follow_redirects=False)
            )
            janitor = UploadJanitor(
                settings.bundle_abort_horizon_seconds, settings.bundle_abort_backoff_cap_seconds
            )
            app.state.upload_janitor = janitor
            stack.callback(janitor.close)
            await sweep_uploads(
                app.state.object_store, timedelta(seconds=settings.bundle_sweep_after_seconds)
            )
            if settings.notifications_enabled:
                worker = NotificationWorker(
                    settings, app.state.sessionmaker, app.state.http, app.state.principals
                )
                app.state.notifications = worker
                task = asyncio.create_task(worker.run(), name="notifications")
                stack.push_async_callback(_stop, task)
            # Ingestion allocates millions of short-lived containers; with the default
            # thresholds the cyclic collector keeps re-walking long-lived startup objects.
            gc.freeze()
            gc.set_threshold(settings.gc_gen0_threshold, 20, 50)
            yield

    app = FastAPI(
        title="EvalBook Reports",
        version=__version__,
        description="Immutable, digested evaluation verdicts: definitions, evaluations, reports.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.suite_cache = SuiteCache()
    app.state.principals = PrincipalCache(settings.auth_cache_seconds)
    app.state.metrics = Metrics()
    if settings.read_fast_lane:
        app.add_middleware(ReportReadFastLane, application=app)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    install_error_handlers(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    install_openapi(app)
    for router in (
        health.router,
        definitions.router,
        evaluations.router,
        # Before the reports router, whose /evaluations/api/reports/{report_id} would
        # otherwise claim /evaluations/api/reports/bundles.
        bundles.router,
        reports.router,
        pages.router,
        peers.router,
        tokens.router,
    ):
        app.include_router(router)
    return app
