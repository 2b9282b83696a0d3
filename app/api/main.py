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

import httpx
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from app import __version__
from app.api.edge import EdgeMiddleware
from app.api.failures import as_problem
from app.api.fastlane import ReportReadFastLane
from app.api.routers import (
    board_pages,
    boards,
    bundles,
    case_proofs,
    definitions,
    diffs,
    docs,
    drilldown_pages,
    evaluations,
    exports,
    health,
    history,
    keys,
    labels,
    pages,
    peers,
    power,
    reports,
    tokens,
    transparency,
)
from app.api.routers.body import problem_errors, validation_failed
from app.api.state import AppState, NotStarted, state_of
from app.api.tile_lane import TileFastLane
from app.domain.errors import PROBLEM_MEDIA_TYPE, ProblemError, instance_of, render_problem
from app.identity.auth import PrincipalCache
from app.identity.revocations import RevocationListener
from app.platform.config import Settings, to_asyncpg_url, to_plain_url
from app.platform.db import ReadPool, build_engine, build_sessionmaker, open_reader_pool
from app.platform.memory import keep_heap_top
from app.platform.metrics import Metrics, MetricsMiddleware
from app.platform.outbound import CallbackPolicy
from app.platform.replica import ReadRouter, stop_polling
from app.platform.storage import ObjectStore
from app.platform.storage.local import LocalObjectStore
from app.platform.storage.s3 import S3ObjectStore
from app.platform.storage.uploads import UploadJanitor
from app.platform.storage.uploads import sweep as sweep_uploads
from app.platform.tree_hashing import TreeHasher
from app.services.diffs import DiffCache
from app.services.kit.case_trees import CaseTreeCache
from app.services.kit.compiled import SuiteCache
from app.services.kit.list_cache import ListCache
from app.services.kit.report_items import ReportItems
from app.services.log_keys import load_log_key
from app.services.signing import Signer, require_active_key
from app.services.transparency import TransparencyLog
from app.workers.notifications import NotificationWorker
from app.workers.sweep import VerificationSweep
from app.workers.witness_push import WitnessPusher

STATIC_DIR = Path(__file__).resolve().parent / "web" / "static"
logger = logging.getLogger(__name__)


async def resolve_database_url(settings: Settings) -> str:
    """The configured database, or the embedded one started in the data directory."""
    if settings.database_url:
        return settings.database_url
    from app.platform.embedded import start_embedded_postgres

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


def problem_response(request: Request, error: ProblemError) -> Response:
    """Render a typed error as application/problem+json (echoed input escaped)."""
    return Response(
        render_problem(error.to_problem(instance_of(request.url.path))),
        status_code=error.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=error.headers,
    )


def install_error_handlers(app: FastAPI) -> None:
    """One handler for typed errors; framework errors become problems too.

    These run in Starlette's ExceptionMiddleware, inside the app, so the connection stays open
    after them. The route class (app/api/routers/route.py) maps every other exception of an endpoint
    to a typed error first; the catch-all below only sees what fails outside any route."""

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> Response:
        return problem_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        return problem_response(request, validation_failed(problem_errors(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        error = ProblemError(str(exc.detail), headers=dict(exc.headers or {}))
        error.status = exc.status_code
        error.type_slug = f"http-{exc.status_code}"
        error.title = str(exc.detail)
        return problem_response(request, error)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        return problem_response(request, as_problem(exc))


async def open_read_pools(
    settings: Settings, database_url: str, stack: AsyncExitStack
) -> tuple[ReadPool, ReadRouter]:
    """The read pool of the primary, and the router of report reads (to the replica's pool
    when one is configured)."""
    reader_pool = await open_reader_pool(settings, database_url)
    stack.push_async_callback(reader_pool.close)
    replica_pool = None
    if settings.read_database_url:
        replica_pool = await open_reader_pool(settings, settings.read_database_url)
        stack.push_async_callback(replica_pool.close)
    reads = ReadRouter(reader_pool, replica_pool, settings.read_replica_poll_seconds)
    if replica_pool is not None:
        stack.push_async_callback(stop_polling, asyncio.create_task(reads.poll(), name="replica"))
    return reader_pool, reads


async def build_state(settings: Settings, stack: AsyncExitStack) -> AppState:
    """Open every resource of the service; `stack` closes them in reverse order."""
    database_url = await resolve_database_url(settings)
    engine = build_engine(settings, database_url)
    stack.push_async_callback(engine.dispose)
    background_engine = build_engine(settings, database_url, background=True)
    stack.push_async_callback(background_engine.dispose)
    background = build_sessionmaker(background_engine)
    reader_pool, reads = await open_read_pools(settings, database_url, stack)
    object_store = await open_object_store(settings, stack)
    http = await stack.enter_async_context(
        httpx.AsyncClient(timeout=httpx.Timeout(10.0), follow_redirects=False)
    )
    janitor = UploadJanitor(
        settings.bundle_abort_horizon_seconds, settings.bundle_abort_backoff_cap_seconds
    )
    stack.callback(janitor.close)
    await sweep_uploads(object_store, timedelta(seconds=settings.bundle_sweep_after_seconds))
    principals = PrincipalCache(settings.auth_cache_seconds)
    signer = Signer(settings.signing_keys_dir, settings.signing_key_file)
    sessionmaker = build_sessionmaker(engine)
    await require_active_key(sessionmaker, signer)
    tree_hasher = TreeHasher(settings.finish_hash_workers, settings.finish_hash_min_cases)
    await tree_hasher.start()
    stack.push_async_callback(tree_hasher.close)
    listener = RevocationListener(to_plain_url(to_asyncpg_url(database_url)), principals)
    stack.push_async_callback(_stop, asyncio.create_task(listener.run(), name="revocations"))
    log_key = await load_log_key(sessionmaker, settings)
    log = TransparencyLog(reader_pool, sessionmaker, log_key, settings, background)
    if settings.log_witness_urls:
        unknown = sorted(set(settings.log_witness_urls) - set(log.witnesses))
        if unknown:
            raise ValueError(f"EVALBOOK_LOG_WITNESS_URLS names no witness key: {unknown}")
        log.push_witnesses = WitnessPusher(log, http, settings.log_witness_urls).push
    stack.push_async_callback(_stop, asyncio.create_task(log.run(), name="checkpoints"))
    return AppState(
        settings=settings,
        engine=engine,
        sessionmaker=sessionmaker,
        background_sessionmaker=background,
        reader_pool=reader_pool,
        reads=reads,
        object_store=object_store,
        http=http,
        upload_janitor=janitor,
        suite_cache=SuiteCache(),
        principals=principals,
        metrics=Metrics(),
        signer=signer,
        case_trees=CaseTreeCache(settings.case_tree_cache_leaves),
        list_pages=ListCache(settings.list_cache_bytes),
        list_items=ReportItems(settings.report_item_cache_bytes),
        tree_hasher=tree_hasher,
        ingest_streams=asyncio.Semaphore(settings.ingest_streams),
        callbacks=CallbackPolicy.from_settings(settings),
        diffs=DiffCache(),
        transparency=log,
    )


def _metrics_of(scope: Scope) -> Metrics | None:
    try:
        return state_of(scope["app"]).metrics
    except NotStarted:
        return None


# In the order they are matched.
ROUTERS = (
    health.router,
    docs.router,
    keys.router,
    transparency.router,
    # The NDJSON twins first: they match only NDJSON bodies, the JSON endpoints the rest.
    definitions.ndjson_router,
    definitions.router,
    evaluations.ndjson_router,
    evaluations.router,
    labels.ndjson_router,
    labels.router,
    bundles.router,
    reports.router,
    case_proofs.router,
    diffs.router,
    boards.router,
    history.router,
    power.router,
    exports.router,
    pages.router,
    drilldown_pages.router,
    board_pages.router,
    peers.router,
    tokens.router,
)


def operation_id(route: APIRoute) -> str:
    """An operation's id is its endpoint's name, so that generated clients get short method
    names (`start_evaluation`, not `start_evaluation_api_v1_evaluations_post`); names are
    unique across the API (tests/clients/test_generated_clients.py)."""
    return route.name


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application; resources are opened by the lifespan, not here."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            state = await build_state(settings, stack)
            app.state.resources = state
            stack.callback(delattr, app.state, "resources")
            if settings.verify_sweep_enabled:
                sweep = VerificationSweep(state.background_sessionmaker, settings, state.metrics)
                stack.push_async_callback(_stop, asyncio.create_task(sweep.run(), name="sweep"))
            if settings.notifications_enabled:
                worker = NotificationWorker(
                    settings,
                    state.background_sessionmaker,
                    state.http,
                    state.principals,
                    state.callbacks,
                )
                task = asyncio.create_task(worker.run(), name="notifications")
                stack.push_async_callback(_stop, task)
            # Ingestion allocates millions of short-lived containers; with the default
            # thresholds the cyclic collector keeps re-walking long-lived startup objects.
            gc.freeze()
            gc.set_threshold(settings.gc_gen0_threshold, 20, 50)
            keep_heap_top()
            yield

    app = FastAPI(
        title="EvalBook Reports",
        version=__version__,
        description="Immutable, digested evaluation verdicts: definitions, evaluations, reports.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        generate_unique_id_function=operation_id,
    )
    if settings.read_fast_lane:
        app.add_middleware(ReportReadFastLane)
    app.add_middleware(MetricsMiddleware, metrics_of=_metrics_of)
    app.add_middleware(EdgeMiddleware, body_idle_seconds=settings.body_idle_seconds)
    if settings.read_fast_lane:
        # Outermost (added last): a kept full tile needs none of the layers above.
        app.add_middleware(TileFastLane)
    install_error_handlers(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.mount(docs.ASSETS_PATH, docs.assets(), name="docs-assets")
    for router in ROUTERS:
        app.include_router(router)
    return app
