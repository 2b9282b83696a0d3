"""The owner's step before the service starts: the report signing key and the transparency
log's own note key, registered with the database owner's login (the service's login may only
read them; docs/transparency.md, "What the service's login cannot do")."""

from __future__ import annotations

from dataclasses import dataclass

from app.platform.config import Settings
from app.platform.db import build_engine, build_sessionmaker
from app.services import log_keys, signing, transparency


@dataclass(frozen=True)
class Provisioned:
    """What the owner's step found or made."""

    signing_keyid: str
    new_log_origin: str | None


async def provision(owner_url: str, settings: Settings, *, rotate_log: bool = False) -> Provisioned:
    """Register the active signing key and the log's note key as the owner (idempotent; on
    `rotate_log` a new note key under a new origin)."""
    engine = build_engine(settings, owner_url)
    try:
        sessionmaker = build_sessionmaker(engine)
        signer = signing.Signer(settings.signing_keys_dir, settings.signing_key_file)
        keyid = await signing.ensure_active_key(sessionmaker, signer)
        async with transparency.writing(sessionmaker) as connection:
            origin = await log_keys.provision_log_key(connection, settings, rotate=rotate_log)
        return Provisioned(keyid, origin)
    finally:
        await engine.dispose()
