"""Delivering peer notifications that app/services/notifications.py wrote to the outbox.

Delivery follows Standard Webhooks (`standardwebhooks` signs): at least once, claimed with
`FOR UPDATE SKIP LOCKED` and a lease, committed before calling out, retried with
exponential backoff and full jitter, given up after a horizon. A peer answering 410 Gone is
disabled. Payloads carry ids only, never a result or a body.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from standardwebhooks.webhooks import Webhook

from app.identity.auth import PrincipalCache
from app.platform.config import Settings
from app.platform.outbound import CallbackPolicy, CallbackRefused
from app.repositories import peers as repo

logger = logging.getLogger(__name__)


def backoff(attempts: int, settings: Settings, rng: random.Random) -> float:
    """Full-jitter exponential backoff after `attempts` failed attempts."""
    ceiling = min(
        settings.notify_backoff_cap_seconds,
        settings.notify_backoff_base_seconds * 2 ** max(0, attempts - 1),
    )
    return rng.uniform(0.0, ceiling)


class NotificationWorker:
    """Claims due messages, delivers them, records the outcome; one per service process.

    Each delivery runs as a task of its own under a deadline for the whole request (the
    answer's body included), so a peer that answers slowly, or drips its answer, costs the
    others nothing: the worker claims more while it waits, at most `notify_batch` deliveries
    in flight, at most `notify_per_peer` of them to one peer (a claim takes at most that many
    of a peer, and none of a peer whose deliveries are still under way)."""

    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        http: httpx.AsyncClient,
        principals: PrincipalCache,
        callbacks: CallbackPolicy,
    ) -> None:
        self.settings = settings
        self.callbacks = callbacks
        self.principals = principals
        self.sessionmaker = sessionmaker
        self.http = http
        self.rng = random.Random()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._per_peer: Counter[uuid.UUID] = Counter()

    def wake(self) -> None:
        """Look for due messages now (after a commit that wrote some)."""
        self._wake.set()

    async def run(self) -> None:
        """Deliver until cancelled (deliveries under way are cancelled too: their leases run
        out and another round delivers them again, at least once)."""
        try:
            while True:
                try:
                    started = await self._dispatch()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("notification round failed")
                    started = 0
                if started:
                    continue
                self._wake.clear()
                # asyncio.timeout, not wait_for: wait_for runs the wait as a task of its own,
                # and on Python 3.11 a cancellation that meets its timeout can be lost, so the
                # worker never stopped (a lifespan's shutdown hung on it, seen in CI).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settings.notify_poll_seconds):
                        await self._wake.wait()
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def run_once(self) -> int:
        """One round, waited for: claim, commit, call out, record. How many were claimed."""
        claimed = await self._claim(self.settings.notify_batch)
        await asyncio.gather(*(self._deliver(row) for row in claimed))
        return len(claimed)

    async def _claim(self, room: int) -> list[Any]:
        # Any peer with deliveries under way sits the claim out: taking up to the limit again
        # beside them would pass it.
        busy = list(self._per_peer)
        async with self.sessionmaker() as session, session.begin():
            return await repo.claim_due(
                session,
                room,
                self.settings.notify_lease_seconds,
                per_peer=self.settings.notify_per_peer,
                busy_peers=busy,
            )

    async def _dispatch(self) -> int:
        """Claim as many as there is room for and start their deliveries; how many."""
        room = self.settings.notify_batch - len(self._tasks)
        if room <= 0:
            return 0
        claimed = await self._claim(room)
        for row in claimed:
            peer = row.peer_id
            self._per_peer[peer] += 1
            task = asyncio.create_task(self._deliver(row), name=f"deliver {row.message_id}")
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._delivered, peer))
        return len(claimed)

    def _delivered(self, peer: uuid.UUID, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._per_peer[peer] -= 1
        if self._per_peer[peer] <= 0:
            del self._per_peer[peer]
        if not task.cancelled() and task.exception() is not None:
            logger.error("a delivery failed", exc_info=task.exception())
        self._wake.set()

    async def _deliver(self, row: Any) -> None:
        now = datetime.now(UTC)
        signature = Webhook(row.signing_secret).sign(row.message_id, now, row.payload)
        headers = {
            "content-type": "application/json",
            "webhook-id": row.message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature,
        }
        error: str | None
        gone = False
        try:
            # Checked again at every delivery (DNS may have changed since the link), and the
            # connection goes to the address checked; redirects are never followed.
            target = await self.callbacks.check(row.callback_url)
            # httpx's timeout bounds each read; this bounds the whole exchange, so a peer
            # that drips its answer a byte at a time is cut off too.
            async with asyncio.timeout(self.settings.notify_timeout_seconds):
                response = await self.http.post(
                    target.url,
                    content=row.payload.encode(),
                    headers={**headers, "host": target.host_header},
                    extensions=target.extensions,
                    timeout=self.settings.notify_timeout_seconds,
                )
            gone = response.status_code == 410
            error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
        except TimeoutError:
            error = f"no whole answer within {self.settings.notify_timeout_seconds:g} s"
        except CallbackRefused as exc:
            error = f"refused before connecting: {exc}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        done = datetime.now(UTC)
        async with self.sessionmaker() as session, session.begin():
            if error is None:
                await repo.mark_delivered(session, row.id, done)
            elif gone:
                await repo.set_status(
                    session, row.peer_id, "disabled", "callback answered 410", done
                )
            else:
                retry_at = done + timedelta(seconds=backoff(row.attempts, self.settings, self.rng))
                horizon = row.created_at + timedelta(seconds=self.settings.notify_horizon_seconds)
                await repo.reschedule(
                    session, row.id, error, None if retry_at > horizon else retry_at, done
                )
