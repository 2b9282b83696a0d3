"""Which failures are a dependency's outage (503, retry) and which are the service's bug (500)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import asyncpg
import sqlalchemy.exc
from starlette.requests import ClientDisconnect

from app.domain.errors import ClientClosedRequest, InternalError, ProblemError, ServiceUnavailable
from app.platform.storage import ObjectStoreUnavailable

logger = logging.getLogger(__name__)

# Raised when the server is unreachable, refuses new sessions (starting up, shutting down,
# too many connections) or dropped the connection under a statement.
_DATABASE_OUTAGES = (
    OSError,
    TimeoutError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.InterfaceError,
    # A connection left mid-protocol by a server that went away under it.
    asyncpg.exceptions.InternalClientError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, what SQLAlchemy wrapped (`orig`) and what caused it (`__cause__`: the
    driver's own error sits there, under SQLAlchemy's adapter), without cycles."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend((getattr(current, "orig", None), current.__cause__))


def is_database_outage(exc: BaseException) -> bool:
    """True for connection-level failures, as opposed to an error in a statement."""
    for link in _chain(exc):
        if isinstance(link, sqlalchemy.exc.DBAPIError) and link.connection_invalidated:
            return True
        if isinstance(link, _DATABASE_OUTAGES):
            return True
    return False


def as_problem(exc: Exception) -> ProblemError:
    """The typed error to answer for an exception no layer turned into one."""
    if isinstance(exc, ProblemError):
        return exc
    if any(isinstance(link, ClientDisconnect) for link in _chain(exc)):
        # The client's own doing (an aborted upload): nothing to page anyone about.
        logger.info("the client disconnected before its request was read")
        return ClientClosedRequest("the client disconnected before its request was read")
    outage = next((link for link in _chain(exc) if isinstance(link, ObjectStoreUnavailable)), None)
    if outage is not None:
        logger.warning("object store unavailable: %r", exc)
        return ServiceUnavailable("the object store is unavailable", retry_after=outage.retry_after)
    if is_database_outage(exc):
        logger.warning("database unavailable: %r", exc)
        return ServiceUnavailable("the database is unavailable")
    logger.error("unexpected error", exc_info=exc)
    return InternalError()
