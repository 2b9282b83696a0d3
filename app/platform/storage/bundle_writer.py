"""Streaming a bundle into a multipart upload: gzip, two digests, bounded memory."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import tempfile
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from isal import isal_zlib

from app.bundles.writing import line
from app.digest.canonical import DIGEST_PREFIX
from app.platform.storage import MultipartUpload

COMPRESS_CHUNK_BYTES = 1 << 20
# Chunks compressing at once: one per core of the project's machines.
COMPRESSING = 2


class BundleWriter:
    """Lines in, gzip parts out.

    Each 1 MiB chunk of lines becomes its own gzip member (RFC 1952: a gzip file is a series
    of members; gunzip, Python's gzip and Node's zlib read them as one stream), so chunks are
    compressed on two threads at once while the loop builds the next ones; a third chain of
    work hashes, in order, the lines (for the trailer) and the stored bytes (for the record).
    One part uploads while the next fills. Memory is bounded by a few chunks and two parts,
    whatever the bundle's size.
    """

    def __init__(self, upload: MultipartUpload, part_bytes: int, level: int) -> None:
        self.upload = upload
        self.part_bytes = part_bytes
        self.level = level
        self.lines = 0
        self.raw_bytes = 0
        self.stored_bytes = 0
        self.lines_hash = hashlib.sha256()
        self.stored_hash = hashlib.sha256()
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.part: list[bytes] = []
        self.part_size = 0
        self.in_flight: asyncio.Task[None] | None = None
        self.compressing: deque[tuple[bytes, asyncio.Future[bytes]]] = deque()
        self.hashing: asyncio.Future[None] | None = None

    def __str__(self) -> str:
        return (
            f"{self.lines} lines, {self.raw_bytes / 1e6:.1f} MB raw, "
            f"{self.stored_bytes / 1e6:.1f} MB stored"
        )

    async def write(self, data: bytes) -> None:
        """Append one line (without its newline)."""
        await self.write_lines([data])

    async def write_lines(self, lines: list[bytes]) -> None:
        """Append several lines (each without its newline)."""
        if not lines:
            return
        data = b"\n".join(lines) + b"\n"
        self.pending.append(data)
        self.lines += len(lines)
        self.pending_bytes += len(data)
        if self.pending_bytes >= COMPRESS_CHUNK_BYTES:
            await self._compress()

    async def write_chunks(self, chunks: Iterable[bytes]) -> None:
        """Append one line given in pieces (a line too long to build whole)."""
        for chunk in chunks:
            self.pending.append(chunk)
            self.pending_bytes += len(chunk)
            if self.pending_bytes >= COMPRESS_CHUNK_BYTES:
                await self._compress()
        self.pending.append(b"\n")
        self.pending_bytes += 1
        self.lines += 1

    def _member(self, chunk: bytes) -> bytes:
        """One chunk as a complete gzip member (ISA-L releases the GIL)."""
        compressor = isal_zlib.compressobj(self.level, isal_zlib.DEFLATED, 31)
        return compressor.compress(chunk) + compressor.flush()

    def _hash(self, chunk: bytes, out: bytes) -> None:
        self.lines_hash.update(chunk)
        self.stored_hash.update(out)

    async def _compress(self) -> None:
        """Start compressing the pending lines; keep at most two chunks compressing."""
        chunk = b"".join(self.pending)
        self.pending.clear()
        self.pending_bytes = 0
        if not chunk:
            return
        self.raw_bytes += len(chunk)
        future = asyncio.get_running_loop().run_in_executor(None, self._member, chunk)
        self.compressing.append((chunk, future))
        while len(self.compressing) > COMPRESSING:
            await self._collect_one()

    async def _collect_one(self) -> None:
        """The oldest chunk's member, in order: hashed (in a thread, after the chunk before)
        and added to the part; a full part ships."""
        chunk, future = self.compressing.popleft()
        out = await future
        previous = self.hashing

        async def hash_after() -> None:
            if previous is not None:
                await previous
            await asyncio.to_thread(self._hash, chunk, out)

        self.hashing = asyncio.ensure_future(hash_after())
        self.part.append(out)
        self.part_size += len(out)
        if self.part_size >= self.part_bytes:
            await self._ship()

    async def _drain(self) -> None:
        """Every chunk compressed, added and hashed."""
        while self.compressing:
            await self._collect_one()
        if self.hashing is not None:
            await self.hashing

    async def _ship(self) -> None:
        data = b"".join(self.part)
        self.part.clear()
        self.part_size = 0
        self.stored_bytes += len(data)
        if self.in_flight is not None:
            await self.in_flight
        self.in_flight = asyncio.create_task(self.upload.write_part(data))

    async def finish(self) -> None:
        """Write the trailer, flush the last part and complete the upload."""
        await self._compress()
        await self._drain()
        trailer = line(
            {
                "kind": "trailer",
                "lines": self.lines,
                "sha256": DIGEST_PREFIX + self.lines_hash.hexdigest(),
            }
        )
        self.pending.append(trailer + b"\n")
        await self._compress()
        await self._drain()
        await self._ship()
        assert self.in_flight is not None
        await self.in_flight
        self.in_flight = None
        await self.upload.complete()

    async def discard(self) -> None:
        """Stop any part in flight (the caller aborts the upload)."""
        for _, future in self.compressing:
            with contextlib.suppress(BaseException):
                await future
        self.compressing.clear()
        if self.hashing is not None:
            with contextlib.suppress(BaseException):
                await self.hashing
            self.hashing = None
        if self.in_flight is not None and not self.in_flight.done():
            self.in_flight.cancel()
        if self.in_flight is not None:
            with contextlib.suppress(BaseException):
                await self.in_flight
        self.in_flight = None

    @property
    def digest(self) -> str:
        """sha256 of the stored bytes."""
        return DIGEST_PREFIX + self.stored_hash.hexdigest()


class ItemSpool:
    """`unavailable` or `redacted` items, spooled to a temporary file as they are found."""

    def __init__(self) -> None:
        self.file = tempfile.SpooledTemporaryFile(max_size=1 << 20)  # noqa: SIM115
        self.count = 0

    def add(self, item: dict[str, Any]) -> None:
        """Record one item."""
        if self.count:
            self.file.write(b",")
        self.file.write(orjson.dumps(item, option=orjson.OPT_SORT_KEYS))
        self.count += 1

    def chunks(self, kind: str) -> Iterator[bytes]:
        """The line `{"items": [...], "kind": kind}` in pieces, read back from the spool."""
        self.file.seek(0)
        yield b'{"items":['
        while chunk := self.file.read(COMPRESS_CHUNK_BYTES):
            yield chunk
        yield b'],"kind":' + orjson.dumps(kind) + b"}"

    def close(self) -> None:
        """Drop the spool."""
        self.file.close()
