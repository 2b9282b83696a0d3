"""Opening an incident from a read: a request that found a stored part no longer matching
what its report bound records it in a transaction of its own (the read itself writes
nothing), so the health view, reads and `forSubject` see it at once."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.repositories import reports as repo
from app.services.reports import INCIDENT_KINDS


class IncidentRecorder:
    """Opens at most one open incident per report (later findings join the open one)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self.sessionmaker = sessionmaker

    async def open(
        self, project_id: uuid.UUID, report_id: uuid.UUID, digest: str, part: str, detail: str
    ) -> None:
        """Record that `part` of the report failed, with what was found."""
        async with self.sessionmaker() as session, session.begin():
            await repo.open_incident(
                session,
                {
                    "project_id": project_id,
                    "report_id": report_id,
                    "kind": INCIDENT_KINDS[part],
                    "stored_digest": digest,
                    "computed_digest": digest,
                    "detail": f"{part}: {detail}"[:2000],
                },
            )
