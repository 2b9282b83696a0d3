"""The asyncpg connection under a SQLAlchemy session: for COPY and bulk reads, and for the read
repository's statements inside the request's transaction."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from sqlalchemy.ext.asyncio import AsyncSession

from app.db import ReadConnection, WriteConnection


async def driver_of(session: AsyncSession) -> WriteConnection:
    """The raw driver connection under a session (in the session's transaction)."""
    connection = await session.connection()
    raw = await connection.get_raw_connection()
    driver: WriteConnection = raw.driver_connection
    return driver


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
