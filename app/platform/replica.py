"""Reads from a streaming replica, never behind what a client has seen written.

With `EVALBOOK_READ_DATABASE_URL` set, the report reads (GET report, forSubject, the lists and
the pages that show them) go to a read pool on that server, a PostgreSQL hot standby. Each
write request's response carries `EvalBook-Read-After`: the primary's WAL position once the
request's transaction has committed. A read that sends it back is served by the replica only
once the replica has replayed that far, else by the primary; so is any read while the replica
is behind this process's own last write. Without the header, and for another process's writes,
a read may be as old as the replica's lag. An unreachable replica sends reads to the primary
until it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from app.platform.db import ReadConnection, reading

logger = logging.getLogger(__name__)
HEADER = "EvalBook-Read-After"
_LSN = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")
# An unreachable replica is polled this much less often, up to this many seconds.
_BACKOFF_CAP = 5.0
# Whatever acquiring or polling the replica raises (refused, reset, mid-protocol, shut down)
# means the same: the primary answers until the replica does again.
_UNREACHABLE = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)


def parse_lsn(text: str | None) -> int | None:
    """A PostgreSQL WAL position (`16/B374D848`) as an integer; None for anything else."""
    if text is None:
        return None
    found = _LSN.match(text.strip())
    if found is None:
        return None
    return (int(found[1], 16) << 32) | int(found[2], 16)


# What a read naming an unreadable position waits for: more than any replica will replay, so
# the primary answers it (a malformed header must not make a read staler).
PRIMARY_ONLY = 1 << 64


def read_after(header: str | None) -> int | None:
    """The position an `EvalBook-Read-After` header asks for; a malformed one asks for the
    primary."""
    if header is None:
        return None
    position = parse_lsn(header)
    return PRIMARY_ONLY if position is None else position


def format_lsn(value: int) -> str:
    """The text form of a WAL position."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


class ReplicaGone(Exception):
    """A read on the replica failed because the replica went away; the same read, tried
    again, goes to the primary."""


class ReadRouter:
    """Chooses the pool of each report read: the replica when it has replayed far enough."""

    def __init__(self, primary: Any, replica: Any | None, poll_seconds: float) -> None:
        self.primary = primary
        self.replica = replica
        self.poll_seconds = poll_seconds
        # This process's last committed write, and what the replica has replayed (0: unknown
        # or unreachable, so nothing waits on it).
        self.written = 0
        self.replayed = 0

    @property
    def has_replica(self) -> bool:
        """Whether a replica is configured."""
        return self.replica is not None

    def pool_for(self, after: int | None) -> Any:
        """The replica's pool when it has replayed this process's writes and `after`."""
        if self.replica is None or self.replayed == 0:
            return self.primary
        needed = max(self.written, after or 0)
        return self.replica if self.replayed >= needed else self.primary

    def connection(
        self, after: int | None = None
    ) -> contextlib.AbstractAsyncContextManager[ReadConnection]:
        """A read connection: the replica's when it may answer, else the primary's. A replica
        connection that fails under its user raises ReplicaGone (retry: the primary answers)."""
        if self.replica is None:
            # No replica to fall back from: the primary's pool as it is (this runs per read).
            return reading(self.primary)
        return self._routed(after)

    @asynccontextmanager
    async def _routed(self, after: int | None) -> AsyncIterator[ReadConnection]:
        pool = self.pool_for(after)
        async with contextlib.AsyncExitStack() as stack:
            try:
                connection = await stack.enter_async_context(reading(pool))
            except _UNREACHABLE:
                if pool is self.primary:
                    raise
                # The replica went away since the last poll: the primary answers meanwhile.
                self.replayed = 0
                connection = await stack.enter_async_context(reading(self.primary))
                pool = self.primary
            try:
                yield connection
            except _UNREACHABLE as exc:
                if pool is self.primary:
                    raise
                self.replayed = 0
                raise ReplicaGone("the read replica went away during a read") from exc

    async def note_write(self) -> int:
        """The primary's WAL position now (after a commit); later reads here wait for it."""
        async with reading(self.primary) as connection:
            lsn = parse_lsn(await connection.fetchval("SELECT pg_current_wal_lsn()::text")) or 0
        self.written = max(self.written, lsn)
        return lsn

    async def poll(self) -> None:
        """Keep `replayed` current: the replica's replayed WAL position, every poll period."""
        if self.replica is None:
            return
        delay = self.poll_seconds
        while True:
            try:
                async with reading(self.replica) as connection:
                    text = await connection.fetchval("SELECT pg_last_wal_replay_lsn()::text")
                self.replayed = parse_lsn(text) or 0
                delay = self.poll_seconds
            except _UNREACHABLE as exc:
                if self.replayed:
                    logger.warning("read replica unreachable, reading from the primary: %s", exc)
                self.replayed = 0
                delay = min(delay * 2, _BACKOFF_CAP)
            await asyncio.sleep(delay)


async def stop_polling(task: asyncio.Task[None]) -> None:
    """Cancel the poller and wait for it."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
