"""The transparency log's own note key (docs/transparency.md, "Keys"): made and registered by
the database owner (`evalbook keys init`, `evalbook keys rotate-log`), apart from the report
signing key; the service loads the newest one and holds its private half in a file."""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.digest.signing import KeyRing, load_private_key, write_private_key
from app.platform.config import Settings
from app.platform.db import WriteConnection
from app.repositories import transparency as repo
from app.repositories.raw import driver_of
from app.tlog import note as notes


@dataclass(frozen=True)
class LogKey:
    """The log's note signing key, under the log's origin as its name."""

    name: str
    private: Ed25519PrivateKey

    @property
    def verifier(self) -> notes.Verifier:
        """Its verifier (what the keys document lists)."""
        return notes.Verifier(self.name, notes.raw(self.private.public_key()))


class LogKeyError(RuntimeError):
    """The log's note key is not registered, or this process does not hold it."""


def _held_note_keys(settings: Settings) -> dict[bytes, Ed25519PrivateKey]:
    """The note keys this process holds (the configured file, and those generated into the
    data directory), by raw public key."""
    ring = KeyRing.load(settings.log_keys_dir, settings.log_key_file)
    return {notes.raw(key.public_key()): key for key in ring.keys.values()}


async def load_log_key(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings
) -> LogKey:
    """The log's newest note key: registered by the owner (`evalbook keys init`), its private
    half in this process's files. A log whose only key derives from the report key (before
    logs had keys of their own) is refused until the owner gives it one."""
    async with sessionmaker() as session:
        row = await repo.note_key(await driver_of(session))
    if row is None or row["source_keyid"] is not None:
        raise LogKeyError(
            "the transparency log has no note key of its own: run `evalbook keys init` as the "
            "database owner (`evalbook serve` does it when it migrates)"
        )
    key = _held_note_keys(settings).get(bytes(row["public_key"]))
    if key is None:
        where = settings.log_key_file or settings.log_keys_dir
        raise LogKeyError(
            f"the transparency log's note key ({row['name']}) has no private key in {where} "
            "(copy it there, or set EVALBOOK_LOG_KEY_FILE)"
        )
    return LogKey(row["name"], key)


def _new_origin(name: str, taken: list[str]) -> str:
    """An origin no key of this log has used: the configured one, else it with /2, /3 ..."""
    if name not in taken:
        return name
    n = 2
    while f"{name}/{n}" in taken:
        n += 1
    return f"{name}/{n}"


async def provision_log_key(
    connection: WriteConnection, settings: Settings, *, rotate: bool = False
) -> str | None:
    """The owner's step: give the log a note key of its own when it has none (or only one
    derived from the report key), or a new one on `rotate`, under a new origin when the
    configured one was used; the new origin, or None when nothing changed."""
    await repo.lock_keys(connection)
    row = await repo.note_key(connection)
    if row is not None and row["source_keyid"] is None and not rotate:
        if settings.log_key_file is not None:
            configured = notes.raw(load_private_key(settings.log_key_file).public_key())
            if configured != bytes(row["public_key"]):
                raise LogKeyError(
                    f"log key file {settings.log_key_file} holds another key than the log's "
                    f"({row['name']}); a new log key is a new origin: `evalbook keys rotate-log`"
                )
        return None
    if settings.log_key_file is not None and not rotate:
        key = load_private_key(settings.log_key_file)
    else:
        key = Ed25519PrivateKey.generate()
        write_private_key(settings.log_keys_dir, key)
    public = notes.raw(key.public_key())
    if row is not None and bytes(row["public_key"]) == public:
        raise LogKeyError("the new log key is the one the log has: give another key file")
    name = _new_origin(settings.log_name(), await repo.note_key_names(connection))
    await repo.add_note_key(connection, name, public)
    return name
