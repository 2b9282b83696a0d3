"""Reading a bundle file: gzip-compressed lines, with progress, strict about truncation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from isal import isal_zlib

from app.bundles.results import NotABundle

INFLATE_ERROR: type[Exception] = isal_zlib.error  # type: ignore[assignment]
READ_BYTES = 1 << 20


def _inflate(chunk: bytes, state: list[Any]) -> bytes:
    """Inflate a chunk that may cross gzip member boundaries (a bundle may be a series of
    members, RFC 1952); `state` is [inflater, inside a member, any member started]."""
    out = []
    while chunk:
        inflater = state[0]
        try:
            out.append(inflater.decompress(chunk))
        except INFLATE_ERROR as exc:
            if not state[2]:
                raise NotABundle(f"not a gzip stream: {exc}") from None
            raise EOFError(f"corrupt gzip stream: {exc}") from None
        state[1] = state[2] = True
        if inflater.eof:
            state[0] = isal_zlib.decompressobj(31)
            state[1] = False
            chunk = inflater.unused_data
        else:
            chunk = b""
    return b"".join(out)


def read_lines(handle: BinaryIO, progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """Decompressed lines (without newline); raises NotABundle / EOFError on bad gzip."""
    state: list[Any] = [isal_zlib.decompressobj(31), False, False]
    rest = b""
    while True:
        chunk = handle.read(READ_BYTES)
        if progress is not None:
            progress(len(chunk))
        if not chunk:
            break
        data = _inflate(chunk, state)
        if not data:
            continue
        pieces = (rest + data).split(b"\n")
        rest = pieces.pop()
        yield from pieces
    if not state[2]:
        raise NotABundle("empty file")
    if state[1]:
        if rest:
            yield rest
        raise EOFError("the gzip stream is truncated")
    if rest:
        yield rest
