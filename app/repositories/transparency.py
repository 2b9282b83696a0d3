"""The transparency log's rows (raw driver connections): entries appended under one lock,
leaves and entries by index range, checkpoints, cosignatures and the log's note key."""

from __future__ import annotations

import uuid
from typing import Any

from app.db import ReadConnection, WriteConnection
from app.merkle import leaf_hash

# pg_advisory_xact_lock keys: appending (issuers serialise on it until they commit), cutting a
# checkpoint (one process at a time), and registering the log's note key (processes starting
# together; apart from cutting, so that a start never waits on another process's cut).
APPEND_LOCK = 0x6C6F67_61707064  # "logappd"
CUT_LOCK = 0x6C6F67_63757474  # "logcutt"
KEY_LOCK = 0x6C6F67_6B657973  # "logkeys"


APPEND_SQL = """
INSERT INTO log_entries (idx, kind, report_id, entry, leaf)
SELECT (SELECT coalesce(max(idx) + 1, 0) FROM log_entries) + u.ord - 1,
       u.kind, u.report_id, u.entry, u.leaf
FROM unnest($1::text[], $2::uuid[], $3::bytea[], $4::bytea[])
     WITH ORDINALITY AS u(kind, report_id, entry, leaf, ord)
RETURNING idx
"""


async def append(
    connection: WriteConnection, items: list[tuple[str, uuid.UUID, bytes]]
) -> list[int]:
    """Append (kind, report id, entry) rows at the next indexes; the lock is held until the
    transaction ends, so indexes are contiguous in commit order. Two round trips: the lock,
    then one statement whose snapshot (taken after the lock) sees every earlier append."""
    if not items:
        return []
    await connection.execute("SELECT pg_advisory_xact_lock($1)", APPEND_LOCK)
    rows = await connection.fetch(
        APPEND_SQL,
        [kind for kind, _, _ in items],
        [report_id for _, report_id, _ in items],
        [entry for _, _, entry in items],
        [leaf_hash(entry) for _, _, entry in items],
    )
    return sorted(row[0] for row in rows)


async def size(connection: ReadConnection) -> int:
    """How many entries the log holds (committed)."""
    value: int = await connection.fetchval("SELECT coalesce(max(idx) + 1, 0) FROM log_entries")
    return value


async def leaves(connection: ReadConnection, start: int, end: int) -> bytes:
    """The leaf hashes of entries [start, end), joined (32 bytes each)."""
    value = await connection.fetchval(
        "SELECT string_agg(leaf, ''::bytea ORDER BY idx) FROM log_entries"
        " WHERE idx >= $1 AND idx < $2",
        start,
        end,
    )
    return bytes(value or b"")


async def entries(connection: ReadConnection, start: int, end: int) -> list[bytes]:
    """The entries [start, end), in index order."""
    rows = await connection.fetch(
        "SELECT entry FROM log_entries WHERE idx >= $1 AND idx < $2 ORDER BY idx", start, end
    )
    return [bytes(r[0]) for r in rows]


async def entry_of(connection: ReadConnection, kind: str, report_id: uuid.UUID) -> Any:
    """(idx, entry) of a report's or a supersession's entry, or None."""
    return await connection.fetchrow(
        "SELECT idx, entry FROM log_entries WHERE kind = $1 AND report_id = $2", kind, report_id
    )


async def latest_checkpoint(connection: ReadConnection) -> Any:
    """The newest checkpoint (size, root, note), or None."""
    return await connection.fetchrow(
        "SELECT size, root, note FROM log_checkpoints ORDER BY size DESC LIMIT 1"
    )


async def checkpoint_at(connection: ReadConnection, tree_size: int) -> Any:
    """The checkpoint of this size, or None."""
    return await connection.fetchrow(
        "SELECT size, root, note FROM log_checkpoints WHERE size = $1", tree_size
    )


async def add_checkpoint(
    connection: WriteConnection, tree_size: int, root: bytes, note: bytes
) -> None:
    """Store a cut checkpoint (a second cut of the same size changes nothing)."""
    await connection.execute(
        "INSERT INTO log_checkpoints (size, root, note) VALUES ($1, $2, $3)"
        " ON CONFLICT (size) DO NOTHING",
        tree_size,
        root,
        note,
    )


async def cosignatures(connection: ReadConnection, tree_size: int) -> list[str]:
    """The cosignature lines of a checkpoint, by witness name."""
    rows = await connection.fetch(
        "SELECT line FROM log_cosignatures WHERE size = $1 ORDER BY witness", tree_size
    )
    return [r[0] for r in rows]


async def add_cosignature(
    connection: WriteConnection, tree_size: int, witness: str, line: str
) -> bool:
    """Keep a witness's cosignature of a checkpoint (its first one); True when new."""
    status: str = await connection.execute(
        "INSERT INTO log_cosignatures (size, witness, line) VALUES ($1, $2, $3)"
        " ON CONFLICT (size, witness) DO NOTHING",
        tree_size,
        witness,
        line,
    )
    return status.endswith(" 1")


async def note_key(connection: ReadConnection) -> Any:
    """The log's note key (name, public key, the signing key it derives from), or None before
    the first start."""
    return await connection.fetchrow("SELECT name, public_key, source_keyid FROM log_keys LIMIT 1")


async def add_note_key(
    connection: WriteConnection, name: str, public: bytes, source_keyid: str
) -> None:
    """Register the log's note key (once)."""
    await connection.execute(
        "INSERT INTO log_keys (name, public_key, source_keyid) VALUES ($1, $2, $3)"
        " ON CONFLICT DO NOTHING",
        name,
        public,
        source_keyid,
    )


async def active_signing_keyid(connection: ReadConnection) -> str | None:
    """The report signing key active now."""
    value: str | None = await connection.fetchval(
        "SELECT keyid FROM signing_keys WHERE status = 'active'"
    )
    return value
