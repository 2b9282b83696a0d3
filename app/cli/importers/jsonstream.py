"""Streaming reads of large JSON documents (ijson), with the line a reader has reached."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import ijson

from app.cli.importers.source import SourceError

_CHUNK = 1 << 16


class LineCountingReader:
    """A binary file that counts the newlines handed out, so errors can name a line."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.lines_read = 0

    def read(self, size: int = -1) -> bytes:
        """The next bytes, counted."""
        chunk = self._stream.read(size)
        self.lines_read += chunk.count(b"\n")
        return chunk

    @property
    def line(self) -> int:
        """The (1-based) line the parser has reached."""
        return self.lines_read + 1


def items(path: Path, prefix: str) -> Iterator[tuple[Any, int]]:
    """Each value at `prefix` (ijson syntax), with the line reached; syntax errors named."""
    with path.open("rb") as raw:
        counted = LineCountingReader(raw)
        try:
            for item in ijson.items(counted, prefix, use_float=True, buf_size=_CHUNK):
                yield item, counted.line
        except ijson.JSONError as exc:
            raise SourceError(
                path, f"not valid JSON ({_reason(exc)}): is the file complete?", line=counted.line
            ) from exc


def first(path: Path, prefix: str) -> Any:
    """The first value at `prefix`, or None (stops reading as soon as it is found)."""
    for item, _ in items(path, prefix):
        return item
    return None


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
