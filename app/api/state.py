"""The application's resources, built completely by the lifespan and typed in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: auth and the services read the state themselves
    import asyncio

    import httpx
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

    from app.identity.auth import PrincipalCache
    from app.platform.config import Settings
    from app.platform.db import ReadPool
    from app.platform.metrics import Metrics
    from app.platform.outbound import CallbackPolicy
    from app.platform.replica import ReadRouter
    from app.platform.storage import ObjectStore
    from app.platform.storage.uploads import UploadJanitor
    from app.platform.tree_hashing import TreeHasher
    from app.services.diffs import DiffCache
    from app.services.kit.case_trees import CaseTreeCache
    from app.services.kit.compiled import SuiteCache
    from app.services.kit.list_cache import ListCache
    from app.services.kit.report_items import ReportItems
    from app.services.signing import Signer
    from app.services.transparency import TransparencyLog


@dataclass(frozen=True, slots=True)
class AppState:
    """Everything a request may use; one instance per running application."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    # Sessions of the background workers, on a small engine of their own.
    background_sessionmaker: async_sessionmaker[AsyncSession]
    reader_pool: ReadPool
    # Report reads: the replica's pool when one is configured and has caught up, else the above.
    reads: ReadRouter
    object_store: ObjectStore
    http: httpx.AsyncClient
    upload_janitor: UploadJanitor
    suite_cache: SuiteCache
    principals: PrincipalCache
    metrics: Metrics
    signer: Signer
    case_trees: CaseTreeCache
    list_pages: ListCache
    list_items: ReportItems
    # Finishing hashes large cases trees in worker processes.
    tree_hasher: TreeHasher
    # Turns of the NDJSON case uploads streaming into the database at once (app/api/deps.py).
    ingest_streams: asyncio.Semaphore
    # Where peer callbacks may go (app/platform/outbound.py).
    callbacks: CallbackPolicy
    # Diffs of two reports, computed once (app/services/diffs.py).
    diffs: DiffCache
    # The transparency log: checkpoints, tiles, proofs (app/services/transparency.py).
    transparency: TransparencyLog


class NotStarted(RuntimeError):
    """The application's lifespan has not built its state (yet)."""


def public_base_url(state: AppState, request: Any) -> str:
    """The configured public base URL, else the scheme and host this request reached."""
    configured = state.settings.public_base_url
    return configured.rstrip("/") if configured else str(request.base_url).rstrip("/")


def state_of(app: Any) -> AppState:
    """The running application's state (`app` is the FastAPI or Starlette application)."""
    state = getattr(app.state, "resources", None)
    if state is None:
        raise NotStarted("the application's lifespan has not started")
    resources: AppState = state
    return resources
