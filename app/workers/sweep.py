"""The background verification sweep: every report re-verified at a bounded pace, so that
tampering is found without anyone asking. One sweeper at a time across processes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.platform.config import Settings
from app.platform.metrics import Metrics
from app.repositories import reports as repo
from app.services import integrity
from app.services.reports import check_report

logger = logging.getLogger(__name__)


@dataclass
class SweepRound:
    """What one round did: whether it held the lock, how many reports it verified, how many
    failed verification."""

    swept: bool
    verified: int = 0
    failed: int = 0


async def sweep_once(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings, metrics: Metrics
) -> SweepRound:
    """Verify up to `verify_sweep_batch` reports due again (newest first), in one transaction
    that holds the sweep's lock; another process's round skips meanwhile."""
    due_before = datetime.now(UTC) - timedelta(hours=settings.verify_sweep_every_hours)
    async with sessionmaker() as session, session.begin():
        if not await repo.try_sweep_lock(session):
            return SweepRound(swept=False)
        outcome = SweepRound(swept=True)
        due = await repo.due_for_verification(session, due_before, settings.verify_sweep_batch)
        checks = await repo.check_rows_of(session, [report.id for report, _ in due])
        found_before = await integrity.lookups(session, [report.id for report, _ in due])
        verified: list[tuple[uuid.UUID, bool]] = []
        for report, envelope in due:
            # Hashing and parsing run on the event loop: let requests in between reports.
            await asyncio.sleep(0)
            answer = await check_report(
                session, report, envelope, checks.get(report.id, []), found_before
            )
            verified.append((report.id, answer.verified))
            outcome.failed += not answer.verified
        outcome.verified = len(verified)
        await repo.record_verifications(session, verified, datetime.now(UTC))
        if outcome.failed:
            logger.warning("verification sweep: %d reports no longer verify", outcome.failed)
            metrics.open_incidents.set(await repo.count_open_incidents(session))
    return outcome


class VerificationSweep:
    """Runs `sweep_once` every `verify_sweep_interval_seconds` until cancelled."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        settings: Settings,
        metrics: Metrics,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.settings = settings
        self.metrics = metrics

    async def run(self) -> None:
        """Sweep until cancelled; a failed round is logged and the next one comes on time."""
        while True:
            try:
                await sweep_once(self.sessionmaker, self.settings, self.metrics)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("verification sweep round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.sleep(self.settings.verify_sweep_interval_seconds)
