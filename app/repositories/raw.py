"""The asyncpg connection under a SQLAlchemy session: for COPY and bulk reads, and for the read
repository's statements inside the request's transaction."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from sqlalchemy.ext.asyncio import AsyncSession

from app.platform.db import ReadConnection, WriteConnection

# session.info's key of (the transaction, its driver connection).
_DRIVER = "evalbook.driver"


async def driver_of(session: AsyncSession) -> WriteConnection:
    """The raw driver connection under a session, inside the session's transaction (begun on
    the server here if no statement has begun it yet)."""
    transaction = session.get_transaction()
    held = session.info.get(_DRIVER)
    if held is not None and transaction is not None and held[0] is transaction:
        driver: WriteConnection = held[1]
        return driver
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    adapted = raw.dbapi_connection
    # SQLAlchemy's asyncpg adapter sends BEGIN with its first statement; a statement sent
    # to the driver first would otherwise run outside the session's transaction.
    if adapted._transaction is None:  # type: ignore[union-attr]
        await adapted._start_transaction()  # type: ignore[union-attr]
    own: WriteConnection | None = raw.driver_connection
    assert own is not None, "a session's connection has its driver's"
    session.info[_DRIVER] = (session.get_transaction(), own)
    return own


async def read_connection(session: AsyncSession) -> ReadConnection:
    """The session's own connection for `repositories.reads`, once what the session holds is
    flushed (so that the reads see the transaction's writes)."""
    await session.flush()
    return await driver_of(session)


@contextlib.asynccontextmanager
async def on_session_end(
    session: AsyncSession, callback: Callable[[], None] | None
) -> AsyncIterator[None]:
    """Call `callback` if the server ends the session's connection (an idle transaction's
    timeout, a restart, a terminated backend) while the block runs; nothing when None."""
    if callback is None:
        yield
        return
    driver = await driver_of(session)

    def ended(_: object) -> None:
        callback()

    driver.add_termination_listener(ended)
    try:
        yield
    finally:
        driver.remove_termination_listener(ended)
