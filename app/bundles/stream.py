"""Reading a bundle file: gzip-compressed lines, with progress, strict about the gzip stream.

A bundle may be a series of gzip members (RFC 1952). The stream must end exactly where its
last member ends: a cut member (`truncated`), a damaged one (`gzip`: bad deflate data, CRC or
length, a refused header flag) and bytes after the last member that cannot start one
(`trailing_bytes`) are each one failure, which replaces everything read before it
(docs/bundles.md, "Strictness"). The verifier checks each member's fixed header itself, so
that the inflater's own leniency (isal reads reserved flags that zlib refuses) decides
nothing.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from isal import isal_zlib

from app.bundles.results import NotABundle

INFLATE_ERROR: type[Exception] = isal_zlib.error  # type: ignore[assignment]
# Compressed bytes a read: a batch inflated from 128 KiB (~230 KB of lines) is still in the
# cache when the checks reach it. The whole Python verification of the bench bundle took
# 0.24-0.26 s in-process this way, against 0.29-0.36 s with reads of 1 MiB.
READ_BYTES = 1 << 17
# Batches read ahead of the checks (one a read).
READ_AHEAD = 8
GZIP_START = b"\x1f\x8b\x08"
# Reserved flags and a header CRC: refused in a member's fixed header (the Node verifier's
# zlib refuses the first, and the second is never written by the service).
REFUSED_FLAGS = 0xE2


class GzipDamage(Exception):
    """The gzip stream is damaged: `code` is truncated, gzip or trailing_bytes."""

    def __init__(self, code: str, what: str) -> None:
        super().__init__(what)
        self.code = code
        self.what = what


def first_header_problem(head: bytes) -> str | None:
    """What is wrong with the first member's fixed header (both verifiers read it first)."""
    if len(head) < 10:
        return "the first gzip header is cut short"
    if head[3] & REFUSED_FLAGS:
        return "the first gzip header sets reserved flags or a header CRC"
    return None


def _inflate(chunk: bytes, state: list[Any]) -> bytes:
    """Inflate a chunk that may cross member boundaries; `state` is [inflater, inside a member,
    members completed, bytes held back at a member's start]. Each later member's fixed header
    is checked here: bytes after the last member that cannot start one are trailing bytes."""
    out = []
    if state[3]:
        chunk, state[3] = state[3] + chunk, b""
    while chunk:
        if not state[1]:
            if state[2]:
                head = chunk[:4]
                if not GZIP_START.startswith(head[:3]) or (
                    len(head) == 4 and head[3] & REFUSED_FLAGS
                ):
                    raise GzipDamage("trailing_bytes", "bytes after the last gzip member")
                if len(head) < 4:
                    state[3] = chunk
                    break
            state[1] = True
        inflater = state[0]
        try:
            out.append(inflater.decompress(chunk))
        except INFLATE_ERROR as exc:
            raise GzipDamage("gzip", f"a damaged gzip member ({exc})") from None
        if inflater.eof:
            state[0] = isal_zlib.decompressobj(31)
            state[1] = False
            state[2] += 1
            chunk = inflater.unused_data
        else:
            chunk = b""
    return b"".join(out)


def read_batches(handle: BinaryIO, progress: Callable[[int], None] | None) -> Iterator[list[bytes]]:
    """The decompressed lines (without newline) in batches, as each read completes them;
    NotABundle when the file is no gzip stream at all, GzipDamage when the stream is damaged
    anywhere."""
    state: list[Any] = [isal_zlib.decompressobj(31), False, 0, b""]
    # The pieces of the line under way, joined once its end comes: a long line is never
    # copied again at every read.
    pending: list[bytes] = []
    first = True
    while True:
        chunk = handle.read(READ_BYTES)
        if progress is not None:
            progress(len(chunk))
        if first:
            if not chunk.startswith(GZIP_START):
                raise NotABundle("not a gzip stream")
            problem = first_header_problem(chunk[:10])
            if problem is not None:
                raise GzipDamage("gzip", problem)
            first = False
        if not chunk:
            break
        data = _inflate(chunk, state)
        if b"\n" not in data:
            if data:
                pending.append(data)
            continue
        pieces = data.split(b"\n")
        if pending:
            pieces[0] = b"".join([*pending, pieces[0]])
        last = pieces.pop()
        pending = [last] if last else []
        yield pieces
    if state[1] or state[3]:
        raise GzipDamage("truncated", "the gzip stream is truncated")
    if pending:
        yield [b"".join(pending)]


def read_batches_ahead(
    handle: BinaryIO, progress: Callable[[int], None] | None
) -> Iterator[list[bytes]]:
    """`read_batches` on a thread of its own, up to READ_AHEAD batches ahead: inflating releases
    the GIL, so it overlaps the checks. Raises what `read_batches` raises, where it would; the
    thread is stopped and joined when the reader stops early."""
    batches: queue.Queue[Any] = queue.Queue(READ_AHEAD)
    stop = threading.Event()
    end = object()

    def hand_over(item: Any) -> bool:
        while not stop.is_set():
            try:
                batches.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for batch in read_batches(handle, progress):
                if not hand_over(batch):
                    return
        except BaseException as exc:  # handed to the reader, which raises it
            hand_over(exc)
            return
        hand_over(end)

    thread = threading.Thread(target=read, name="bundle-reader", daemon=True)
    thread.start()
    try:
        while (item := batches.get()) is not end:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()
