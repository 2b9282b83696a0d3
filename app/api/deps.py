"""The dependencies every endpoint declares, as `Annotated` aliases over the typed state."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.failures import is_database_outage
from app.api.state import AppState, public_base_url, state_of
from app.domain.errors import ServiceUnavailable
from app.platform.config import Settings
from app.platform.db import ReadConnection, reading
from app.platform.metrics import Metrics
from app.platform.outbound import CallbackPolicy
from app.platform.replica import HEADER as READ_AFTER_HEADER
from app.platform.replica import read_after
from app.platform.storage import ObjectStore
from app.platform.storage.uploads import UploadJanitor
from app.services.case_reading import CaseReading
from app.services.evaluations import Ingesting
from app.services.incidents import IncidentRecorder
from app.services.issuance import Finishing
from app.services.kit.case_trees import CaseTreeCache
from app.services.kit.compiled import SuiteCache


async def app_state(request: Request) -> AppState:
    """The running application's resources."""
    return state_of(request.app)


State = Annotated[AppState, Depends(app_state)]


SESSION_KEY = "evalbook.session"
logger = logging.getLogger(__name__)


async def session_dependency(request: Request, state: State) -> AsyncIterator[AsyncSession]:
    """One session and one transaction per request.

    The route class (app/api/routers/route.py) commits it once the endpoint has returned and
    before the response is sent, so a failed commit is an error response like any other;
    whatever was not committed (the endpoint failed, or a page rendered its error) is rolled
    back when the session closes here. A connection PostgreSQL has already ended (an idle
    transaction's timeout, a restart) is closed quietly: the request has had its answer (a
    503 or 408 for what failed on it), and the pool replaces the connection."""
    session = state.sessionmaker()
    request.scope[SESSION_KEY] = session
    try:
        yield session
    finally:
        try:
            await session.close()
        except Exception as exc:
            if not is_database_outage(exc):
                raise
            logger.info("closed a session whose connection the database had ended: %r", exc)
            with contextlib.suppress(Exception):
                await session.invalidate()


async def ingest_turn_dependency(state: State) -> AsyncIterator[None]:
    """A turn among the NDJSON case uploads this process streams into the database at once:
    each holds a pooled connection while its body arrives, so a few slow or stalled streams
    can never take the connections every other request needs (503 after waiting too long)."""
    settings = state.settings
    try:
        async with asyncio.timeout(settings.ingest_stream_wait_seconds):
            await state.ingest_streams.acquire()
    except TimeoutError:
        raise ServiceUnavailable(
            f"{settings.ingest_streams} case uploads are streaming into this process; "
            "retry, or send the cases as a JSON batch",
            retry_after=max(1, math.ceil(settings.ingest_stream_wait_seconds)),
        ) from None
    try:
        yield
    finally:
        state.ingest_streams.release()


async def reader_dependency(state: State) -> AsyncIterator[ReadConnection]:
    """A connection of the read pool for one request (no ORM, no explicit transaction)."""
    async with reading(state.reader_pool) as connection:
        yield connection


async def report_reads_dependency(request: Request, state: State) -> AsyncIterator[ReadConnection]:
    """A connection for report reads: the replica's once it has replayed what the request's
    `EvalBook-Read-After` names and this process wrote, else the primary's
    (app/platform/replica.py)."""
    after = read_after(request.headers.get(READ_AFTER_HEADER))
    async with state.reads.connection(after) as connection:
        yield connection


async def public_url_dependency(request: Request, state: State) -> str:
    """Where clients reach the service: configured, or the address this request reached."""
    return public_base_url(state, request)


async def settings_dependency(state: State) -> Settings:
    """The service's settings."""
    return state.settings


async def store_dependency(state: State) -> ObjectStore:
    """The object store."""
    return state.object_store


async def suite_cache_dependency(state: State) -> SuiteCache:
    """The compiled-suite cache."""
    return state.suite_cache


async def metrics_dependency(state: State) -> Metrics:
    """The application's Prometheus collectors."""
    return state.metrics


async def case_trees_dependency(state: State) -> CaseTreeCache:
    """The built cases trees (case proofs)."""
    return state.case_trees


async def callbacks_dependency(state: State) -> CallbackPolicy:
    """Where peer callbacks may go."""
    return state.callbacks


async def incidents_dependency(state: State) -> IncidentRecorder:
    """Opens incidents found while serving a read, in their own transaction on the background
    pool (a request that holds a session never waits on its own pool for a second one)."""
    return IncidentRecorder(state.background_sessionmaker)


async def janitor_dependency(state: State) -> UploadJanitor:
    """Aborts the uploads of failed bundle builds."""
    return state.upload_janitor


async def ingesting_dependency(state: State) -> Ingesting:
    """What storing cases needs, from the application's state."""
    settings = state.settings
    return Ingesting(
        store=state.object_store,
        suites=state.suite_cache,
        inline_limit=settings.inline_output_limit_bytes,
        chunk_rows=settings.ingest_chunk_rows,
        accepted=state.metrics.cases_accepted,
        flush_seconds=settings.ingest_flush_seconds,
    )


async def finishing_dependency(state: State) -> Finishing:
    """What issuing a report needs, from the application's state."""
    return Finishing(
        suites=state.suite_cache,
        signer=state.signer,
        reading=CaseReading(
            state.reader_pool,
            state.settings.finish_work_mem,
            state.tree_hasher,
            state.settings.finish_pooled_reads_from,
        ),
        issued=state.metrics.reports_issued,
    )


Session = Annotated[AsyncSession, Depends(session_dependency, scope="function")]
IngestTurn = Annotated[None, Depends(ingest_turn_dependency, scope="function")]
Reader = Annotated[ReadConnection, Depends(reader_dependency, scope="function")]
ReportReads = Annotated[ReadConnection, Depends(report_reads_dependency, scope="function")]
AppSettings = Annotated[Settings, Depends(settings_dependency)]
PublicURL = Annotated[str, Depends(public_url_dependency)]
Store = Annotated[ObjectStore, Depends(store_dependency)]
Suites = Annotated[SuiteCache, Depends(suite_cache_dependency)]
AppMetrics = Annotated[Metrics, Depends(metrics_dependency)]
Callbacks = Annotated[CallbackPolicy, Depends(callbacks_dependency)]
Janitor = Annotated[UploadJanitor, Depends(janitor_dependency)]
CaseTrees = Annotated[CaseTreeCache, Depends(case_trees_dependency)]
Incidents = Annotated[IncidentRecorder, Depends(incidents_dependency)]
IngestNeeds = Annotated[Ingesting, Depends(ingesting_dependency)]
FinishNeeds = Annotated[Finishing, Depends(finishing_dependency)]
