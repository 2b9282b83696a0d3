"""Signing reports: which key is active (the database), the private keys (files), the
attestation written in the issuing transaction, rotation and the public keys document."""

from __future__ import annotations

import base64
import hashlib
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.digest.canonical import timestamp
from app.digest.signing import (
    KeyFileError,
    KeyRing,
    envelope,
    keyid_of,
    load_private_key,
    raw_public,
    report_statement,
    supersession_statement,
    write_private_key,
)
from app.domain.errors import InternalError, NotFound
from app.identity.auth import Principal
from app.models import SigningKey
from app.repositories import signing as repo
from app.services import reports
from app.tlog.note import Verifier

# A locking read of the active key that waited on a rotation sees the retired row and no
# other: the next statement sees the new key.
ACTIVE_KEY_ATTEMPTS = 3


# Why a report has no signed statement to serve.
UNSIGNED = "this report was issued before reports were signed"


class Signer:
    """The private keys this process can sign with, reloaded when a new one appears."""

    def __init__(self, directory: Path, key_file: Path | None) -> None:
        self.directory = directory
        self.key_file = key_file
        self.ring = KeyRing.load(directory, key_file)

    def private(self, keyid: str) -> Ed25519PrivateKey:
        """The private key of `keyid` (the directory is read again when it is not known)."""
        key = self.ring.keys.get(keyid)
        if key is None:
            self.ring = KeyRing.load(self.directory, self.key_file)
            key = self.ring.keys.get(keyid)
        if key is None:
            raise InternalError(f"the active signing key {keyid} has no private key here")
        return key


async def require_active_key(sessionmaker: async_sessionmaker[AsyncSession], signer: Signer) -> str:
    """At the service's start: the owner registered an active key, this process holds its
    private half, and a configured key file is that key. Returns its keyid."""
    async with sessionmaker() as session:
        active = await repo.active_key(session)
    if active is None:
        raise KeyFileError(
            "no active signing key: run `evalbook keys init` as the database owner "
            "(`evalbook serve` does it when it migrates)"
        )
    if signer.key_file is not None:
        keyid = keyid_of(load_private_key(signer.key_file).public_key())
        if keyid != active.keyid:
            raise KeyFileError(
                f"signing key file {signer.key_file} holds {keyid}, not the active key "
                f"{active.keyid}: run `evalbook keys init` as the database owner to make it active"
            )
    return held_private(signer, active.keyid)


def held_private(signer: Signer, keyid: str) -> str:
    """`keyid`, once this process is known to hold its private key (else one line naming
    where it should be)."""
    try:
        signer.private(keyid)
    except InternalError as exc:
        raise KeyFileError(
            f"the active signing key {keyid} has no private key in {signer.directory} "
            "(copy it there, or set EVALBOOK_SIGNING_KEY_FILE)"
        ) from exc
    return keyid


async def ensure_active_key(sessionmaker: async_sessionmaker[AsyncSession], signer: Signer) -> str:
    """The owner's step (`evalbook keys init`): the configured key file's key is the active
    one; without it, the active key (generated into the keys directory the first time).
    Returns its keyid."""
    async with sessionmaker() as session, session.begin():
        await repo.lock_registration(session)
        active = await repo.active_key(session)
        now = datetime.now(UTC)
        if signer.key_file is not None:
            key = load_private_key(signer.key_file)
            keyid = keyid_of(key.public_key())
            if active is not None and active.keyid == keyid:
                return keyid
            known = await repo.get_key(session, keyid)
            if known is not None:
                raise KeyFileError(
                    f"signing key file {signer.key_file}: holds {keyid}, which was retired"
                )
            if active is not None:
                await repo.retire(session, active.keyid, now)
            await repo.add_active(session, keyid, raw_public(key.public_key()), now)
            return keyid
        if active is None:
            key = Ed25519PrivateKey.generate()
            write_private_key(signer.directory, key)
            keyid = keyid_of(key.public_key())
            await repo.add_active(session, keyid, raw_public(key.public_key()), now)
            signer.ring = KeyRing.load(signer.directory, None)
            return keyid
        return held_private(signer, active.keyid)


async def rotate(session: AsyncSession, signer: Signer) -> SigningKey:
    """A new active key; the previous one is retired (it keeps verifying what it signed).
    A report being issued holds the active key's row, so the rotation waits for it."""
    if signer.key_file is not None:
        raise KeyFileError(
            f"the signing key comes from {signer.key_file}: replace that file and restart instead"
        )
    await repo.lock_registration(session)
    # Wait for every report being signed with the current key; only then is "now" after them.
    active = await repo.active_key(session, exclusive=True)
    key = Ed25519PrivateKey.generate()
    write_private_key(signer.directory, key)
    now = datetime.now(UTC)
    if active is not None:
        await repo.retire(session, active.keyid, now)
    keyid = keyid_of(key.public_key())
    await repo.add_active(session, keyid, raw_public(key.public_key()), now)
    created = await repo.get_key(session, keyid)
    assert created is not None
    return created


async def hold_active_key(session: AsyncSession) -> SigningKey:
    """The active key, its row share-locked until the transaction ends (issue it first, then
    take the issue time: a report is signed by a key active when it was issued)."""
    for _ in range(ACTIVE_KEY_ATTEMPTS):
        active = await repo.hold_active(session)
        if active is not None:
            return active
    raise InternalError("no active signing key")


async def attest_report(
    session: AsyncSession,
    signer: Signer,
    key: SigningKey,
    report_id: uuid.UUID,
    body_bytes: bytes,
    digest: str,
    subject: dict[str, Any],
) -> str:
    """Sign the report's statement with `key` and store the envelope beside the report; the
    envelope's digest."""
    payload = report_statement(body_bytes, str(report_id), digest, subject)
    signed = envelope(payload, signer.private(key.keyid))
    attestation_digest = "sha256:" + hashlib.sha256(signed).hexdigest()
    await repo.add_attestation(session, report_id, key.keyid, signed, attestation_digest)
    return attestation_digest


async def attest_supersessions(
    session: AsyncSession,
    signer: Signer,
    key: SigningKey,
    superseded: list[uuid.UUID],
    successor: tuple[uuid.UUID, str] | None,
    reason: str,
    at: datetime,
) -> list[tuple[uuid.UUID, str]]:
    """Sign one supersession statement per superseded report (successor: id and digest, or
    None when a suite version's activation superseded it); (report id, statement digest)."""
    private = signer.private(key.keyid)
    rows: list[dict[str, object]] = []
    for report_id, digest, body in await repo.digests_and_bodies(session, superseded):
        predicate = {
            "superseded_report_id": str(report_id),
            "superseded_report_digest": digest,
            "successor_report_id": None if successor is None else str(successor[0]),
            "successor_report_digest": None if successor is None else successor[1],
            "reason": reason,
            "at": timestamp(at),
        }
        subject = orjson.loads(body)["subject"]
        signed = envelope(supersession_statement(predicate, subject), private)
        rows.append(
            {
                "report_id": report_id,
                "keyid": key.keyid,
                "envelope": signed,
                "digest": "sha256:" + hashlib.sha256(signed).hexdigest(),
            }
        )
    await repo.add_supersession_attestations(session, rows)
    return [(uuid.UUID(str(row["report_id"])), str(row["digest"])) for row in rows]


async def supersession_attestation(
    session: AsyncSession, principal: Principal, report_id: uuid.UUID
) -> bytes:
    """A superseded report's signed supersession statement; 404 while current, for another
    project's report, or for a supersession from before reports were signed."""
    await reports.get(session, principal, report_id)
    found = await repo.supersession_attestation(session, report_id)
    if found is None:
        raise NotFound("no signed supersession of this report")
    return found.envelope


def key_entry(key: SigningKey) -> dict[str, Any]:
    """A key as the public keys document lists it."""
    return {
        "keyid": key.keyid,
        "alg": "ed25519",
        "public_key": base64.b64encode(key.public_key).decode(),
        "status": key.status,
        "created_at": timestamp(key.created_at),
        "retired_at": None if key.retired_at is None else timestamp(key.retired_at),
    }


async def public_keys(session: AsyncSession, log: Verifier | None = None) -> dict[str, Any]:
    """Every key, active and retired: `{"keys": [...], "log": {...}}`."""
    answer: dict[str, Any] = {"keys": [key_entry(k) for k in await repo.all_keys(session)]}
    if log is not None:
        answer["log"] = {
            "name": log.name,
            "key_hash": log.hash.hex(),
            "public_key": base64.b64encode(log.public).decode(),
            "vkey": log.vkey(),
        }
    return answer


async def report_attestation(
    session: AsyncSession, principal: Principal, report_id: uuid.UUID
) -> bytes:
    """A report's DSSE envelope bytes; 404 for another project's report or one issued unsigned."""
    await reports.get(session, principal, report_id)
    found = await repo.attestation(session, report_id)
    if found is None:
        raise NotFound(UNSIGNED)
    return found.envelope
