"""Revocations reach every process at once: each keeps a LISTEN connection, and a revoked
token (announced by a trigger when its transaction commits) empties the principal cache. The
cache's time-to-live stays as the fallback for whatever a dropped connection missed."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import asyncpg

from app.identity.auth import PrincipalCache

logger = logging.getLogger(__name__)
CHANNEL = "evalbook_revocations"


class RevocationListener:
    """One LISTEN connection, reconnected when it drops (the cache is emptied then too, for
    the announcements it may have missed)."""

    def __init__(self, url: str, principals: PrincipalCache, retry_seconds: float = 1.0) -> None:
        self.url = url
        self.principals = principals
        self.retry_seconds = retry_seconds
        self.listening = asyncio.Event()

    def _revoked(self, connection: object, pid: int, channel: str, payload: object) -> None:
        self.principals.forget_all()

    async def run(self) -> None:
        """Listen until cancelled, reconnecting after a failure."""
        while True:
            try:
                await self._listen_once()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                logger.warning("revocation listener failed: %r", exc)
            await asyncio.sleep(self.retry_seconds)

    async def _listen_once(self) -> None:
        """One connection's lifetime: listen, then wait until it is lost."""
        lost = asyncio.Event()
        connection = await asyncpg.connect(self.url)
        try:
            connection.add_termination_listener(lambda _: lost.set())
            await connection.add_listener(CHANNEL, self._revoked)
            self.principals.forget_all()
            self.listening.set()
            await lost.wait()
            logger.warning("revocation listener lost its connection; reconnecting")
        finally:
            self.listening.clear()
            with contextlib.suppress(Exception):
                await connection.close(timeout=2)
