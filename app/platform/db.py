"""Database engine, sessions and migrations."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import asyncpg
from alembic import command
from alembic.config import Config
from asyncpg.cursor import CursorFactory
from asyncpg.transaction import Transaction
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from app.domain.errors import ServiceUnavailable
from app.platform.config import Settings, to_asyncpg_url, to_plain_url

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"


def build_engine(settings: Settings, database_url: str, *, background: bool = False) -> AsyncEngine:
    """Create the service's async engine (called from the lifespan, never at import); with
    `background`, the small engine of the background workers (checkpoints, notifications,
    the sweep), so that requests holding every pooled connection cannot starve them."""
    engine = create_async_engine(
        to_asyncpg_url(database_url),
        pool_size=settings.background_pool_size if background else settings.db_pool_size,
        max_overflow=1 if background else settings.db_max_overflow,
        # A request never waits for ever on a pool every holder waits on (503 instead).
        pool_timeout=settings.db_acquire_timeout_seconds,
        connect_args={
            "server_settings": {
                "statement_timeout": str(settings.db_statement_timeout_ms),
                # A session left inside a transaction (a request that stopped, a stalled
                # upload past the edge's timeout) gives back its locks and its connection.
                "idle_in_transaction_session_timeout": str(
                    settings.db_idle_in_transaction_timeout_ms
                ),
                "application_name": "evalbook-background" if background else "evalbook",
            }
        },
    )
    # A connection the server closed (a restart, a failover, a terminated backend) is found at
    # checkout and replaced, instead of failing the request that drew it. asyncpg notices the
    # server's goodbye on an idle connection by itself, so this costs no round trip (a
    # pre-ping's BEGIN and ROLLBACK were two of every request's, issue 56).
    event.listen(engine.sync_engine, "checkout", _replace_if_closed)
    return engine


def _replace_if_closed(dbapi_connection: Any, _record: object, _proxy: object) -> None:
    """Have the pool draw another connection if the server closed this one."""
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the server closed this pooled connection")


def build_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded objects usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


def alembic_config(database_url: str) -> Config:
    """An Alembic config pointing at the project's migrations and the given database."""
    config = Config(str(ROOT / "alembic.ini")) if (ROOT / "alembic.ini").exists() else Config()
    # Inside the package, so an installed (not editable) service can migrate its database.
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", to_asyncpg_url(database_url).replace("%", "%%"))
    return config


# The connections a repository takes, as the two protocols below (asyncpg-stubs types asyncpg;
# a pool's connection and a plain one are different classes there, each satisfies both): a
# read connection (the read pool's, the replica's, or a session's own) fetches, streams and
# copies rows out; a write connection, the driver connection of the request's session inside
# its transaction, also writes rows in bulk. mypy refuses a read connection where a write one
# is asked for.
class ReadConnection(Protocol):
    """A connection a read runs its statements on (asyncpg's signatures, less what no
    repository passes)."""

    async def fetch(self, query: str, *args: object) -> list[asyncpg.Record]: ...

    async def fetchrow(self, query: str, *args: object) -> asyncpg.Record | None: ...

    async def fetchval(self, query: str, *args: object) -> Any: ...

    async def execute(self, query: str, *args: object) -> str: ...

    def cursor(
        self, query: str, *args: object, prefetch: int | None = ...
    ) -> CursorFactory[asyncpg.Record]: ...

    async def copy_from_query(
        self, query: str, *args: object, output: Any, format: Any = ...
    ) -> str: ...

    def transaction(
        self, *, isolation: Any = ..., readonly: bool = ..., deferrable: bool = ...
    ) -> Transaction: ...

    def is_in_transaction(self) -> bool: ...


class WriteConnection(ReadConnection, Protocol):
    """The request session's own driver connection, inside its transaction."""

    async def executemany(self, command: str, args: Iterable[Sequence[object]]) -> None: ...

    async def copy_records_to_table(
        self, table_name: str, *, records: Any, columns: Any = ...
    ) -> str: ...

    def add_termination_listener(self, callback: Any) -> None: ...

    def remove_termination_listener(self, callback: Any) -> None: ...


# The read pool (of ReaderConnection), or the replica's.
ReadPool: TypeAlias = "asyncpg.Pool[asyncpg.Record]"


def migrate(database_url: str) -> None:
    """Apply every pending migration (synchronous; runs its own event loop)."""
    command.upgrade(alembic_config(database_url), "head")


async def migrate_async(database_url: str) -> None:
    """Apply migrations from async code, in a worker thread with its own loop."""
    await asyncio.to_thread(migrate, database_url)


if TYPE_CHECKING:  # asyncpg's classes are generic in its stubs only
    _Connection = asyncpg.Connection[asyncpg.Record]
    _Pool = asyncpg.Pool[asyncpg.Record]
else:
    _Connection, _Pool = asyncpg.Connection, asyncpg.Pool


class ReaderConnection(_Connection):
    """Connections of the read pool run single read statements and change no session state,
    so handing them back needs no reset round trip."""

    def get_reset_query(self) -> str:
        """Nothing to reset."""
        return ""


# A connection whose operation failed at this level may be left mid-protocol (the server went
# away under it); it must not go back to the pool, where the next request would draw it.
_BROKEN = (
    OSError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)


class PoolExhausted(ServiceUnavailable):
    """No connection of a pool came free within its acquire timeout (503, retry)."""


class NestedAcquire(RuntimeError):
    """A task asked a pool for a connection while it already held one of the same pool: under
    load every holder waits for a connection only another holder can give back (decision
    0019). Raised where `strict_nesting` is on (the tests), counted otherwise."""


# The pools whose connection the running task holds (ids), so a second acquire from the same
# pool by the same request is seen (child tasks inherit it: a holder waiting on them counts).
_HELD: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "evalbook_held_pools", default=frozenset()
)


class NestingWatch:
    """What a nested acquire does: raise (tests) or only count (the served default)."""

    strict = False
    nested = 0


class TimedPool(_Pool):
    """asyncpg's pool whose every acquire waits at most `acquire_timeout` seconds: a pool that
    every holder waits on answers 503 instead of hanging its requests for ever."""

    def __init__(self, *args: Any, acquire_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.acquire_timeout = acquire_timeout

    def acquire(self, *, timeout: float | None = None) -> Any:
        """A connection within `timeout` (the pool's acquire timeout when None)."""
        return super().acquire(timeout=self.acquire_timeout if timeout is None else timeout)


class reading:  # lower case: called as `async with reading(pool) as connection`
    """A connection of the read pool; one that broke under its user is closed, not reused.

    A class rather than a generator-based context manager: it runs on every API read."""

    __slots__ = ("_acquiring", "_connection", "_pool_id", "_token")

    def __init__(self, pool: ReadPool) -> None:
        self._pool_id = id(pool)
        self._acquiring = pool.acquire()

    async def __aenter__(self) -> ReadConnection:
        held = _HELD.get()
        if self._pool_id in held:
            NestingWatch.nested += 1
            if NestingWatch.strict:
                raise NestedAcquire("a second connection of a pool this task already holds one of")
        try:
            self._connection = await self._acquiring.__aenter__()
        except TimeoutError:
            raise PoolExhausted(
                "no database connection came free in time; retry", retry_after=1
            ) from None
        self._token = _HELD.set(held | {self._pool_id})
        return self._connection

    async def __aexit__(self, kind: Any, error: BaseException | None, trace: Any) -> None:
        _HELD.reset(self._token)
        if isinstance(error, _BROKEN):
            self._connection.terminate()
        await self._acquiring.__aexit__(kind, error, trace)


async def open_reader_pool(settings: Settings, database_url: str) -> ReadPool:
    """The pool of the hot read paths (token lookups, report reads), built in the lifespan."""
    pool = TimedPool(
        to_plain_url(to_asyncpg_url(database_url)),
        acquire_timeout=settings.db_acquire_timeout_seconds,
        # Grown on demand and then kept (no idle timeout): a connection opened in the middle of
        # a burst stalls the requests queued behind it for a backend's start-up.
        min_size=2,
        max_size=settings.reader_pool_size,
        max_queries=50_000,
        max_inactive_connection_lifetime=0,
        connect=None,
        setup=None,
        init=None,
        reset=None,
        loop=None,
        connection_class=ReaderConnection,
        record_class=asyncpg.Record,
        server_settings={
            "statement_timeout": str(settings.db_statement_timeout_ms),
            "application_name": "evalbook-reader",
            "default_transaction_read_only": "on",
        },
    )
    await pool
    return pool


SERVICE_ROLE = "evalbook_service"


async def ensure_service_login(owner_url: str, login: str) -> str:
    """Make `login` a login role of the service's role (when missing); the URL of the same
    database as that login. For the embedded default and the tests, where the owner may."""
    from sqlalchemy.engine import make_url

    connection = await asyncpg.connect(to_plain_url(to_asyncpg_url(owner_url)))
    try:
        exists = await connection.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", login)
        if not exists:
            await connection.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE {SERVICE_ROLE}')
    finally:
        await connection.close()
    url = make_url(to_asyncpg_url(owner_url)).set(username=login, password=None)
    return to_plain_url(url.render_as_string(hide_password=False))
