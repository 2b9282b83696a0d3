"""The transparency log (docs/transparency.md): entries appended in the issuing transaction,
checkpoints cut and signed asynchronously, tiles and entry bundles, witness cosignatures, and
a report's entry with its inclusion proof."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.domain.errors import Forbidden, NotFound
from app.identity.auth import Principal
from app.platform.config import Settings
from app.platform.db import ReadConnection, ReadPool, WriteConnection, reading
from app.repositories import transparency as repo
from app.repositories.raw import driver_of
from app.services import reports as report_service
from app.services.log_keys import LogKey
from app.tlog import checkpoint as checkpoints
from app.tlog import note as notes
from app.tlog import tiles

logger = logging.getLogger(__name__)
LEAF_BATCH = 65_536


class LogInconsistency(Exception):
    """The stored log disagrees with itself: entries missing, or a root that does not match."""


async def append(session: AsyncSession, kind: str, ids: list[uuid.UUID]) -> list[int]:
    """Append the entries of reports (kind "report") or of supersession statements (kind
    "supersession", by superseded report) in the request's transaction; the database computes
    each entry from the stored rows, and issuers serialise here until they commit."""
    await session.flush()
    return await repo.append(await driver_of(session), kind, ids)


def _tile_bounds(level: int, tree_size: int) -> int:
    """How many hashes the level holds in a tree of `tree_size` leaves."""
    return tree_size >> (tiles.HEIGHT * level)


@contextlib.asynccontextmanager
async def writing(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[WriteConnection]:
    """The driver connection of a new session inside the session's transaction (`driver_of`
    begins it), committed when the block ends without an error."""
    async with sessionmaker() as session:
        yield await driver_of(session)
        await session.commit()


class TransparencyLog:
    """One process's view of the log: the compact range of the newest checkpoint it cut or
    read, and the full tiles it computed (they never change)."""

    def __init__(
        self,
        pool: ReadPool,
        sessionmaker: async_sessionmaker[AsyncSession],
        key: LogKey,
        settings: Settings,
        background: async_sessionmaker[AsyncSession] | None = None,
    ) -> None:
        self.pool = pool
        self.sessionmaker = sessionmaker
        # The cutter's sessions: the background workers' own engine, when given.
        self.background = background or sessionmaker
        self.key = key
        self.settings = settings
        self.witnesses = {
            v.name: v for v in (notes.parse_vkey(k) for k in settings.log_witness_keys)
        }
        self._tiles: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self._tile_bytes = 0
        # After each round of cutting: ask the witnesses with a submission URL to cosign.
        self.push_witnesses: Callable[[], Awaitable[None]] | None = None

    async def cut(self) -> int | None:
        """Cut and sign a checkpoint when the log has grown since the newest one; its size.
        Cut from the database alone (the newest checkpoint's stored compact range and the
        entries after it), never from this process's memory; the database recomputes the root
        before it stores the note. A stored tree that disagrees with itself opens the log's
        incident (and /readyz names it) instead of being signed or silently skipped."""
        try:
            async with writing(self.background) as connection:
                if not await repo.try_lock_cut(connection):
                    return None
                latest = await repo.latest_checkpoint(connection)
                size = await repo.size(connection)
                if latest is not None and size < latest["size"]:
                    raise LogInconsistency(
                        f"the newest checkpoint covers {latest['size']} entries; the log holds "
                        f"{size}"
                    )
                if latest is not None and size == latest["size"]:
                    return None
                compact = await self._compact_to(connection, latest, size)
                body = checkpoints.Checkpoint(self.key.name, size, compact.root()).text()
                signed = notes.signed_note(
                    body, [notes.sign(body, self.key.name, self.key.private)]
                )
                await repo.add_checkpoint(connection, size, signed)
                return size
        except (LogInconsistency, tiles.TileError, asyncpg.DataCorruptedError) as exc:
            await self._record_inconsistency(str(exc))
        except asyncpg.InvalidParameterValueError as exc:
            await self._record_inconsistency(f"the database refused the cut: {exc}")
        return None

    async def _compact_to(
        self, connection: WriteConnection, latest: Any, size: int
    ) -> tiles.CompactRange:
        """The compact range of the first `size` entries, from the newest checkpoint's."""
        compact = tiles.CompactRange()
        if latest is not None and latest["compact"] is not None:
            compact = tiles.CompactRange.stored(latest["size"], bytes(latest["compact"]))
        while compact.size < size:
            end = min(size, compact.size + LEAF_BATCH)
            joined = await repo.leaves(connection, compact.size, end)
            if len(joined) != tiles.HASH * (end - compact.size):
                raise LogInconsistency(f"entries are missing in [{compact.size}, {end})")
            for i in range(0, len(joined), tiles.HASH):
                compact.append(joined[i : i + tiles.HASH])
        return compact

    async def _record_inconsistency(self, detail: str) -> None:
        """Open the log's incident (one while open) on the background engine."""
        logger.error("the transparency log is inconsistent: %s", detail)
        async with writing(self.background) as connection:
            await repo.open_log_incident(connection, detail[:2000])

    def pool_writer(self) -> contextlib.AbstractAsyncContextManager[WriteConnection]:
        """A writable connection in a transaction of its own (its advisory locks held until
        it ends)."""
        return writing(self.sessionmaker)

    async def run(self) -> None:
        """Cut checkpoints until cancelled, at most once per `log_checkpoint_seconds`."""
        while True:
            try:
                await self.cut()
                if self.push_witnesses is not None:
                    await self.push_witnesses()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("cutting a checkpoint failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.sleep(self.settings.log_checkpoint_seconds)

    def _reading(
        self, held: ReadConnection | None
    ) -> contextlib.AbstractAsyncContextManager[ReadConnection]:
        """The connection the caller holds (a second one from the pool could wait for ever on
        a pool every holder waits on), else one of the pool."""
        return contextlib.nullcontext(held) if held is not None else reading(self.pool)

    async def checkpoint(
        self, held: ReadConnection | None = None
    ) -> tuple[int, bytes, bytes] | None:
        """The newest checkpoint: (size, root, note with the witnesses' cosignatures), read on
        `held` when the caller holds a connection."""
        async with self._reading(held) as connection:
            latest = await repo.latest_checkpoint(connection)
            if latest is None:
                return None
            lines = await repo.cosignatures(connection, latest["size"])
        note = bytes(latest["note"]) + "".join(lines).encode()
        return latest["size"], bytes(latest["root"]), note

    def elements_on(
        self, held: ReadConnection
    ) -> Callable[[int, int, int], Awaitable[list[bytes]]]:
        """`elements`, reading on a connection the caller holds."""
        return functools.partial(self.elements, held=held)

    async def elements(
        self, level: int, start: int, count: int, held: ReadConnection | None = None
    ) -> list[bytes]:
        """Hashes [start, start + count) of a level (0: leaves; L: roots of complete subtrees
        of 256**L leaves)."""
        if level == 0:
            async with self._reading(held) as connection:
                joined = await repo.leaves(connection, start, start + count)
            return [joined[i : i + tiles.HASH] for i in range(0, len(joined), tiles.HASH)]
        out = []
        for j in range(start, start + count):
            below = await self.full_tile(level - 1, j, held)
            out.append(tiles.root_of([below[i : i + 32] for i in range(0, len(below), 32)]))
        return out

    async def full_tile(self, level: int, n: int, held: ReadConnection | None = None) -> bytes:
        """A full tile's 256 hashes (computed once per process, then kept)."""
        key = (level, n)
        found = self._tiles.get(key)
        if found is not None:
            self._tiles.move_to_end(key)
            return found
        data = b"".join(await self.elements(level, n * tiles.WIDTH, tiles.WIDTH, held))
        self._keep(key, data)
        return data

    def forget(self) -> None:
        """Drop what this process remembers of the log (as a restart would)."""
        self._tiles.clear()
        self._tile_bytes = 0

    def cached_tile(self, level: int, n: int) -> bytes | None:
        """A full tile (or full entry bundle, level -1) already computed: it never changes, so
        it is served without asking the database anything."""
        found = self._tiles.get((level, n))
        if found is not None:
            self._tiles.move_to_end((level, n))
        return found

    def _keep(self, key: tuple[int, int], data: bytes) -> None:
        """Keep a full tile, dropping the least recently read beyond the byte budget."""
        if key in self._tiles:
            return
        self._tiles[key] = data
        self._tile_bytes += len(data)
        while self._tiles and self._tile_bytes > self.settings.log_tile_cache_bytes:
            _, dropped = self._tiles.popitem(last=False)
            self._tile_bytes -= len(dropped)

    async def tile(self, level: int, n: int, width: int) -> bytes:
        """A hash tile (level >= 0) or an entry bundle (level -1) the newest checkpoint
        covers; NotFound for one beyond it."""
        if width == tiles.WIDTH:
            kept = self.cached_tile(level, n)
            if kept is not None:
                return kept
        latest = await self.checkpoint()
        tree_size = 0 if latest is None else latest[0]
        held = _tile_bounds(max(level, 0), tree_size)
        end = n * tiles.WIDTH + width
        # Any width the newest tree holds: a partial tile of an earlier checkpoint is what a
        # client of that checkpoint asks for (C2SP tlog-tiles), and it never changes either.
        if end > held:
            raise NotFound("no such tile in the log's newest checkpoint")
        if level < 0:
            async with reading(self.pool) as connection:
                found = await repo.entries(connection, n * tiles.WIDTH, end)
            bundle = tiles.entry_bundle(found)
            if width == tiles.WIDTH:
                self._keep((level, n), bundle)
            return bundle
        if width == tiles.WIDTH:
            return await self.full_tile(level, n)
        return b"".join(await self.elements(level, n * tiles.WIDTH, width))

    async def add_cosignatures(self, body: bytes) -> int:
        """Keep the cosignatures a witness posted with a checkpoint it cosigned: only from a
        configured witness key, only of a checkpoint this log cut. The checkpoint's size."""
        try:
            text, signatures = notes.split(body)
            stated = checkpoints.parse(text)
        except (notes.NoteError, checkpoints.CheckpointError) as exc:
            raise NotFound(f"not a checkpoint this log cut: {exc}") from None
        async with self.pool_writer() as connection:
            ours = await repo.checkpoint_at(connection, stated.size)
            if ours is None or notes.split(bytes(ours["note"]))[0] != text:
                raise NotFound("this log cut no such checkpoint")
            kept = 0
            for signature in signatures:
                witness = self.witnesses.get(signature.name)
                if witness is None:
                    continue
                if not notes.verify_cosignature(text, signature, witness):
                    raise Forbidden(f"the cosignature of {signature.name!r} does not verify")
                await repo.add_cosignature(connection, stated.size, witness.name, signature.line())
                kept += 1
        if not kept:
            raise Forbidden("no cosignature of a witness this log is configured with")
        return stated.size


async def entry_and_proof(
    connection: ReadConnection, log: TransparencyLog, report_id: uuid.UUID, kind: str = "report"
) -> dict[str, Any] | None:
    """A report's (or a board's, with `kind`) entry (bytes, as a JSON fragment), its index,
    and, once a checkpoint covers it, the newest checkpoint note and the inclusion proof
    (base64); None before the log."""
    row = await repo.entry_of(connection, kind, report_id)
    if row is None:
        return None
    index = row["idx"]
    found: dict[str, Any] = {
        "entry": orjson.Fragment(bytes(row["entry"])),
        "index": index,
        "checkpoint": None,
        "inclusion_proof": None,
    }
    latest = await log.checkpoint(connection)
    if latest is not None and index < latest[0]:
        proof = await tiles.inclusion_proof(log.elements_on(connection), index, latest[0])
        found["checkpoint"] = latest[2].decode()
        found["tree_size"] = latest[0]
        found["inclusion_proof"] = [base64.b64encode(p).decode() for p in proof]
    return found


async def report_log(
    reader: ReadConnection, principal: Principal, log: TransparencyLog, report_id: uuid.UUID
) -> dict[str, Any]:
    """A report's entry, its index, the newest checkpoint and the inclusion proof to it."""
    await report_service.read(reader, principal, report_id)
    found = await entry_and_proof(reader, log, report_id)
    if found is None:
        raise NotFound("this report was issued before the transparency log")
    return {"report_id": str(report_id), **found}


@dataclass(frozen=True)
class LogPosition:
    """Where a report stands in the log: its entry's index and the newest checkpoint."""

    index: int | None
    tree_size: int | None
    root: str | None

    @property
    def covered(self) -> bool:
        """Whether the newest checkpoint covers the entry."""
        return self.index is not None and self.tree_size is not None and self.index < self.tree_size


async def log_position(
    session: AsyncSession, log: TransparencyLog, report_id: uuid.UUID
) -> LogPosition:
    """A report's log index and the newest checkpoint (the Reports page shows them)."""
    connection = await driver_of(session)
    row = await repo.entry_of(connection, "report", report_id)
    latest = await log.checkpoint(connection)
    return LogPosition(
        None if row is None else row["idx"],
        None if latest is None else latest[0],
        None if latest is None else base64.b64encode(latest[1]).decode(),
    )
