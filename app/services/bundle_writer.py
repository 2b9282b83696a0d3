"""Streaming a bundle into a multipart upload: gzip, two digests, bounded memory."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
from isal import isal_zlib

from app.bundles.format import line
from app.canonical import DIGEST_PREFIX
from app.storage import MultipartUpload

COMPRESS_CHUNK_BYTES = 1 << 20


class BundleWriter:
    """Lines in, gzip parts out, with at most one part uploading while the next fills.

    Memory is bounded by two compression chunks (one being filled, one in the compressor
    thread), one part being filled and one in flight,
    whatever the bundle's size. `lines_sha256` covers the uncompressed lines (the trailer);
    `stored_sha256` covers the stored bytes (the bundle record).
    """

    def __init__(self, upload: MultipartUpload, part_bytes: int, level: int) -> None:
        self.upload = upload
        self.part_bytes = part_bytes
        # gzip framing (wbits 31) through ISA-L: see docs/decisions.md.
        self.compressor = isal_zlib.compressobj(level, isal_zlib.DEFLATED, 31)
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
        self.compressing: asyncio.Future[bytes] | None = None

    async def write(self, data: bytes) -> None:
        """Append one line (without its newline)."""
        self.pending.append(data)
        self.pending.append(b"\n")
        self.lines += 1
        self.pending_bytes += len(data) + 1
        if self.pending_bytes >= COMPRESS_CHUNK_BYTES:
            await self._compress(final=False)

    async def write_lines(self, lines: list[bytes]) -> None:
        """Append several lines (each without its newline)."""
        if not lines:
            return
        data = b"\n".join(lines) + b"\n"
        self.pending.append(data)
        self.lines += len(lines)
        self.pending_bytes += len(data)
        if self.pending_bytes >= COMPRESS_CHUNK_BYTES:
            await self._compress(final=False)

    async def write_chunks(self, chunks: Iterable[bytes]) -> None:
        """Append one line given in pieces (a line too long to build whole)."""
        for chunk in chunks:
            self.pending.append(chunk)
            self.pending_bytes += len(chunk)
            if self.pending_bytes >= COMPRESS_CHUNK_BYTES:
                await self._compress(final=False)
        self.pending.append(b"\n")
        self.pending_bytes += 1
        self.lines += 1

    def _deflate(self, chunk: bytes, final: bool) -> bytes:
        """Runs in a worker thread, one call at a time: hash, compress, hash the output."""
        self.lines_hash.update(chunk)
        out = self.compressor.compress(chunk)
        if final:
            out += self.compressor.flush()
        self.stored_hash.update(out)
        return out

    async def _compress(self, *, final: bool) -> None:
        """Hand the pending lines to the compressor thread; the loop goes on producing the
        next chunk meanwhile (ISA-L and hashlib release the GIL)."""
        chunk = b"".join(self.pending)
        self.pending.clear()
        self.pending_bytes = 0
        self.raw_bytes += len(chunk)
        await self._collect()
        self.compressing = asyncio.ensure_future(asyncio.to_thread(self._deflate, chunk, final))

    async def _collect(self) -> None:
        """Take the compressed output of the chunk in the thread; ship a full part."""
        if self.compressing is None:
            return
        compressing, self.compressing = self.compressing, None
        out = await compressing
        self.part.append(out)
        self.part_size += len(out)
        if self.part_size >= self.part_bytes:
            await self._ship()

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
        await self._compress(final=False)
        await self._collect()
        trailer = line(
            {
                "kind": "trailer",
                "lines": self.lines,
                "sha256": DIGEST_PREFIX + self.lines_hash.hexdigest(),
            }
        )
        self.pending.append(trailer + b"\n")
        await self._compress(final=True)
        await self._collect()
        await self._ship()
        assert self.in_flight is not None
        await self.in_flight
        self.in_flight = None
        await self.upload.complete()

    async def discard(self) -> None:
        """Stop any part in flight (the caller aborts the upload)."""
        if self.compressing is not None:
            with contextlib.suppress(BaseException):
                await self.compressing
            self.compressing = None
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
