"""Reading a bundle file: gzip-compressed lines, with progress, strict about the gzip stream.

A bundle may be a series of gzip members (RFC 1952). The stream must end exactly where its
last member ends: a cut member (`truncated`), a damaged one (`gzip`: bad deflate data, CRC or
length) and bytes after the last member that are no member (`trailing_bytes`) are each one
failure, which replaces everything read before it (docs/bundles.md, "A damaged stream").
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from app.bundles.results import NotABundle

READ_BYTES = 1 << 20
GZIP_START = b"\x1f\x8b\x08"
# zlib's words for a member header it cannot read: after the first member (whose header the
# verifiers check themselves), that is bytes after the last member. The Node verifier reads
# the same words from the same library.
HEADER_ERRORS = (
    "incorrect header check",
    "unknown compression method",
    "unknown header flags set",
    "header crc mismatch",
)


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
    if head[3] & 0xE2:
        return "the first gzip header sets reserved flags or a header CRC"
    return None


def _inflate(chunk: bytes, state: list[Any]) -> bytes:
    """Inflate a chunk that may cross member boundaries; `state` is [inflater, inside a member,
    members completed]."""
    out = []
    while chunk:
        inflater = state[0]
        try:
            out.append(inflater.decompress(chunk))
        except zlib.error as exc:
            if not state[1] and state[2] and any(e in str(exc) for e in HEADER_ERRORS):
                raise GzipDamage("trailing_bytes", "bytes after the last gzip member") from None
            raise GzipDamage("gzip", f"a damaged gzip member ({exc})") from None
        state[1] = True
        if inflater.eof:
            state[0] = zlib.decompressobj(31)
            state[1] = False
            state[2] += 1
            chunk = inflater.unused_data
        else:
            chunk = b""
    return b"".join(out)


def read_lines(handle: BinaryIO, progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """Decompressed lines (without newline); NotABundle when the file is no gzip stream at
    all, GzipDamage when the stream is damaged anywhere."""
    state: list[Any] = [zlib.decompressobj(31), False, 0]
    rest = b""
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
        if not data:
            continue
        pieces = (rest + data).split(b"\n")
        rest = pieces.pop()
        yield from pieces
    if state[1]:
        raise GzipDamage("truncated", "the gzip stream is truncated")
    if rest:
        yield rest
