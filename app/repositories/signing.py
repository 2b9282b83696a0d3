"""Signing keys and report attestations (SQL only; flush, never commit)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Report, ReportAttestation, SigningKey, SupersessionAttestation
from app.repositories import rows

# Serializes key registration among processes starting together (pg_advisory_xact_lock).
REGISTRATION_LOCK = 0x5E1_6A7E


async def lock_registration(session: AsyncSession) -> None:
    """Hold the registration lock until the transaction ends."""
    await session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": REGISTRATION_LOCK})


async def active_key(
    session: AsyncSession, *, share: bool = False, exclusive: bool = False
) -> SigningKey | None:
    """The active key; `share` locks its row so a rotation waits for this transaction,
    `exclusive` (a rotation) waits for every transaction holding it shared."""
    query = select(SigningKey).where(SigningKey.status == "active")
    if share or exclusive:
        query = query.with_for_update(read=share and not exclusive)
    result = await session.execute(query)
    return result.scalar_one_or_none()


async def hold_active(session: AsyncSession) -> SigningKey | None:
    """The active key, its row share-locked until the transaction ends, through the owner's
    function (a locking read needs UPDATE on the table, which the service does not have)."""
    return await rows.one(
        session,
        SigningKey,
        rows.select_from(SigningKey) + " WHERE keyid = (SELECT evalbook_hold_active_key())",
    )


async def all_keys(session: AsyncSession) -> list[SigningKey]:
    """Every key, oldest first."""
    result = await session.execute(select(SigningKey).order_by(SigningKey.created_at))
    return list(result.scalars())


async def get_key(session: AsyncSession, keyid: str) -> SigningKey | None:
    """One key by id."""
    return await session.get(SigningKey, keyid)


async def retire(session: AsyncSession, keyid: str, at: datetime) -> None:
    """Retire a key (the trigger allows active -> retired once)."""
    await session.execute(
        update(SigningKey)
        .where(SigningKey.keyid == keyid, SigningKey.status == "active")
        .values(status="retired", retired_at=at)
    )
    await session.flush()


async def add_active(session: AsyncSession, keyid: str, public_key: bytes, at: datetime) -> None:
    """Register a new active key."""
    session.add(SigningKey(keyid=keyid, public_key=public_key, status="active", created_at=at))
    await session.flush()


async def add_attestation(
    session: AsyncSession, report_id: uuid.UUID, keyid: str, envelope: bytes, digest: str
) -> None:
    """Store a report's attestation."""
    await rows.insert(
        session,
        ReportAttestation,
        {"report_id": report_id, "keyid": keyid, "envelope": envelope, "digest": digest},
    )


async def attestation(session: AsyncSession, report_id: uuid.UUID) -> ReportAttestation | None:
    """A report's attestation, if it was issued signed."""
    return await session.get(ReportAttestation, report_id)


async def add_supersession_attestations(
    session: AsyncSession, statements: list[dict[str, object]]
) -> None:
    """Store supersession attestations (report_id, keyid, envelope, digest)."""
    await rows.insert_many(session, SupersessionAttestation, statements)


async def supersession_attestation(
    session: AsyncSession, report_id: uuid.UUID
) -> SupersessionAttestation | None:
    """A superseded report's supersession attestation, if it was signed."""
    return await session.get(SupersessionAttestation, report_id)


async def digests_and_bodies(
    session: AsyncSession, report_ids: list[uuid.UUID]
) -> list[tuple[uuid.UUID, str, bytes]]:
    """(id, digest, body bytes) of reports."""
    if not report_ids:
        return []
    result = await session.execute(
        select(Report.id, Report.digest, Report.body).where(Report.id.in_(report_ids))
    )
    return [(row[0], row[1], row[2]) for row in result.all()]
