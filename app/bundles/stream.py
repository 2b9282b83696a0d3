"""Reading a bundle file: gzip-compressed lines, with progress, strict about truncation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

from isal import isal_zlib

from app.bundles.results import NotABundle

INFLATE_ERROR: type[Exception] = isal_zlib.error  # type: ignore[assignment]
READ_BYTES = 1 << 20


def read_lines(handle: BinaryIO, progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """Decompressed lines (without newline); raises NotABundle / EOFError on bad gzip."""
    inflater = isal_zlib.decompressobj(31)
    rest = b""
    started = False
    while True:
        chunk = handle.read(READ_BYTES)
        if progress is not None:
            progress(len(chunk))
        if not chunk:
            break
        try:
            data = inflater.decompress(chunk)
        except INFLATE_ERROR as exc:
            if not started:
                raise NotABundle(f"not a gzip stream: {exc}") from None
            raise EOFError(f"corrupt gzip stream: {exc}") from None
        started = True
        if inflater.eof and inflater.unused_data:
            raise EOFError("bytes after the end of the gzip stream")
        if not data:
            continue
        pieces = (rest + data).split(b"\n")
        rest = pieces.pop()
        yield from pieces
    if not started:
        raise NotABundle("empty file")
    if not inflater.eof:
        if rest:
            yield rest
        raise EOFError("the gzip stream is truncated")
    if rest:
        yield rest
