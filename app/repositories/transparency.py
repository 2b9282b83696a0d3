"""The transparency log's rows (raw driver connections): entries appended under one lock,
leaves and entries by index range, checkpoints, cosignatures and the log's note key."""

from __future__ import annotations

import uuid
from typing import Any

from app.platform.db import ReadConnection, WriteConnection

# pg_advisory_xact_lock keys: appending (issuers serialise on it until they commit), cutting a
# checkpoint (one process at a time), and registering the log's note key (processes starting
# together; apart from cutting, so that a start never waits on another process's cut).
APPEND_LOCK = 0x6C6F67_61707064  # "logappd"
CUT_LOCK = 0x6C6F67_63757474  # "logcutt"
KEY_LOCK = 0x6C6F67_6B657973  # "logkeys"


async def append(connection: WriteConnection, kind: str, ids: list[uuid.UUID]) -> list[int]:
    """Append the entries of reports (or of supersession statements, by superseded report) at
    the next indexes. The definer function computes each entry from the stored rows and holds
    the append lock until the transaction ends, so indexes are contiguous in commit order."""
    if not ids:
        return []
    rows = await connection.fetch("SELECT evalbook_log_append($1, $2::uuid[])", kind, ids)
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
    """The newest checkpoint (size, root, note, compact range), or None."""
    return await connection.fetchrow(
        "SELECT size, root, note, compact FROM log_checkpoints ORDER BY size DESC LIMIT 1"
    )


async def witnessed_checkpoint(connection: ReadConnection, above: int, need: int) -> Any:
    """The newest checkpoint of more than `above` entries with at least `need` cosignatures
    (size, root, note), or None."""
    return await connection.fetchrow(
        "SELECT c.size, c.root, c.note FROM log_checkpoints c JOIN ("
        " SELECT size FROM log_cosignatures WHERE size > $1 GROUP BY size"
        " HAVING count(*) >= $2 ORDER BY size DESC LIMIT 1) w ON w.size = c.size",
        above,
        need,
    )


async def checkpoint_at(connection: ReadConnection, tree_size: int) -> Any:
    """The checkpoint of this size, or None."""
    return await connection.fetchrow(
        "SELECT size, root, note FROM log_checkpoints WHERE size = $1", tree_size
    )


async def add_checkpoint(connection: WriteConnection, tree_size: int, note: bytes) -> bytes:
    """Store a signed checkpoint through the definer function, which recomputes the root from
    the stored entries and refuses a note that does not state it; the root."""
    root: bytes = await connection.fetchval(
        "SELECT evalbook_log_checkpoint($1, $2)", tree_size, note
    )
    return bytes(root)


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
    """The log's newest note key (name, public key, and the signing key it derives from for a
    log begun before it had a key of its own), or None before the owner made one."""
    return await connection.fetchrow(
        "SELECT name, public_key, source_keyid FROM log_keys ORDER BY created_at DESC, name LIMIT 1"
    )


async def note_key_names(connection: ReadConnection) -> list[str]:
    """Every origin the log has signed under, oldest first."""
    rows = await connection.fetch("SELECT name FROM log_keys ORDER BY created_at, name")
    return [r[0] for r in rows]


async def add_note_key(connection: WriteConnection, name: str, public: bytes) -> None:
    """Register a note key of the log's own (the owner only)."""
    await connection.execute(
        "INSERT INTO log_keys (name, public_key, source_keyid) VALUES ($1, $2, NULL)",
        name,
        public,
    )


async def open_log_incident(connection: WriteConnection, detail: str) -> None:
    """Open the log's incident (no report, no project) unless one is open."""
    await connection.execute(
        "INSERT INTO incidents (project_id, report_id, kind, stored_digest, computed_digest,"
        " detail) VALUES (NULL, NULL, 'log_inconsistent', '', '', $1) ON CONFLICT DO NOTHING",
        detail,
    )


async def lock_keys(connection: WriteConnection) -> None:
    """Hold the log key's lock to the end of the transaction (one provisioning at a time)."""
    await connection.execute("SELECT pg_advisory_xact_lock($1)", KEY_LOCK)


async def try_lock_cut(connection: WriteConnection) -> bool:
    """Take the cut's lock for the transaction if no other process holds it."""
    locked: bool = await connection.fetchval("SELECT pg_try_advisory_xact_lock($1)", CUT_LOCK)
    return locked
