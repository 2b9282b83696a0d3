"""Peer notifications: written to the outbox with the change, delivered by a worker.

Delivery follows Standard Webhooks (`standardwebhooks` signs): at least once, claimed with
`FOR UPDATE SKIP LOCKED` and a lease, committed before calling out, retried with
exponential backoff and full jitter, given up after a horizon. A peer answering 410 Gone is
disabled. Payloads carry ids only, never a result or a body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from standardwebhooks.webhooks import Webhook

from app.auth import PrincipalCache
from app.config import Settings
from app.outbound import CallbackPolicy, CallbackRefused
from app.repositories import peers as repo

logger = logging.getLogger(__name__)
SUPERSEDED = "report.superseded"


async def announce_superseded(
    session: AsyncSession,
    project_id: uuid.UUID,
    superseded: list[uuid.UUID],
    successor: uuid.UUID | None,
) -> None:
    """Outbox rows for every active peer and superseded report, in the caller's transaction."""
    if not superseded:
        return
    peers = await repo.active_peer_ids(session, project_id)
    rows: list[dict[str, Any]] = []
    for report_id in superseded:
        payload = orjson.dumps(
            {
                "type": SUPERSEDED,
                "data": {
                    "report_id": str(report_id),
                    "superseded_by": None if successor is None else str(successor),
                },
            }
        ).decode()
        rows.extend(
            {
                "message_id": "msg_" + secrets.token_hex(16),
                "project_id": project_id,
                "peer_id": peer_id,
                "event_type": SUPERSEDED,
                "payload": payload,
            }
            for peer_id in peers
        )
    await repo.enqueue(session, rows)


def backoff(attempts: int, settings: Settings, rng: random.Random) -> float:
    """Full-jitter exponential backoff after `attempts` failed attempts."""
    ceiling = min(
        settings.notify_backoff_cap_seconds,
        settings.notify_backoff_base_seconds * 2 ** max(0, attempts - 1),
    )
    return rng.uniform(0.0, ceiling)


class NotificationWorker:
    """Claims due messages, delivers them, records the outcome; one per service process."""

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

    def wake(self) -> None:
        """Look for due messages now (after a commit that wrote some)."""
        self._wake.set()

    async def run(self) -> None:
        """Deliver until cancelled."""
        while True:
            try:
                delivered = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("notification round failed")
                delivered = 0
            if delivered:
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.notify_poll_seconds)

    async def run_once(self) -> int:
        """One round: claim, commit, call out, record. Returns how many were claimed."""
        async with self.sessionmaker() as session, session.begin():
            claimed = await repo.claim_due(
                session, self.settings.notify_batch, self.settings.notify_lease_seconds
            )
        if claimed:
            await asyncio.gather(*(self._deliver(row) for row in claimed))
        return len(claimed)

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
            response = await self.http.post(
                target.url,
                content=row.payload.encode(),
                headers={**headers, "host": target.host_header},
                extensions=target.extensions,
                timeout=self.settings.notify_timeout_seconds,
            )
            gone = response.status_code == 410
            error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
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
