"""A local directory object store (the embedded default)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO

from app.platform.storage.base import ObjectNotFound, ObjectStoreUnavailable

UPLOADS_DIR = ".uploads"


class LocalUpload:
    """A multipart upload as a hidden temporary file, renamed into place on completion."""

    def __init__(self, store: LocalObjectStore, key: str) -> None:
        self.key = key
        self.target = store._path(key)
        self.temporary = store.root / UPLOADS_DIR / f"{uuid.uuid4().hex}.part"
        self.temporary.parent.mkdir(parents=True, exist_ok=True)
        self.handle: BinaryIO | None = open(self.temporary, "wb")  # noqa: SIM115

    async def write_part(self, data: bytes) -> None:
        """Append bytes to the temporary file."""
        assert self.handle is not None, "upload already closed"
        await asyncio.to_thread(self.handle.write, data)

    def _complete(self) -> None:
        assert self.handle is not None, "upload already closed"
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        self.handle = None
        self.target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.temporary, self.target)

    async def complete(self) -> None:
        """Flush, then rename into place (atomic)."""
        await asyncio.to_thread(self._complete)

    def _abort(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None
        self.temporary.unlink(missing_ok=True)

    async def abort(self) -> None:
        """Close and remove the temporary file."""
        await asyncio.to_thread(self._abort)


class LocalObjectStore:
    """Objects as files below one directory; writes are atomic (temp file, then rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ValueError(f"object key escapes the store: {key!r}")
        return path

    def _write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        """Store bytes under a key."""
        await asyncio.to_thread(self._write, key, data)

    async def get(self, key: str) -> bytes:
        """Read an object."""
        try:
            return await asyncio.to_thread(self._path(key).read_bytes)
        except FileNotFoundError:
            raise ObjectNotFound(key) from None

    async def exists(self, key: str) -> bool:
        """True when the object exists."""
        return await asyncio.to_thread(self._path(key).is_file)

    async def delete(self, key: str) -> None:
        """Remove an object if present."""
        await asyncio.to_thread(self._path(key).unlink, True)

    async def ping(self) -> None:
        """The directory must exist and be writable."""
        try:
            await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        except OSError as exc:
            raise ObjectStoreUnavailable(str(exc)) from exc
        if not os.access(self.root, os.W_OK):
            raise ObjectStoreUnavailable(f"{self.root} is not writable")

    async def begin_upload(self, key: str, content_type: str) -> LocalUpload:
        """Start writing an object in parts."""
        return await asyncio.to_thread(LocalUpload, self, key)

    def _sweep(self, older_than: timedelta) -> int:
        cutoff = time.time() - older_than.total_seconds()
        removed = 0
        for path in (self.root / UPLOADS_DIR).glob("*.part"):
            if path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    async def sweep_uploads(self, prefix: str, older_than: timedelta) -> int:
        """Remove temporary files of uploads abandoned longer ago than `older_than`."""
        return await asyncio.to_thread(self._sweep, older_than)

    async def stream(self, key: str, chunk_bytes: int = 1 << 20) -> AsyncIterator[bytes]:
        """Read a file in chunks."""
        try:
            handle = await asyncio.to_thread(open, self._path(key), "rb")
        except FileNotFoundError:
            raise ObjectNotFound(key) from None
        try:
            while chunk := await asyncio.to_thread(handle.read, chunk_bytes):
                yield chunk
        finally:
            handle.close()

    async def size(self, key: str) -> int:
        """The file's size."""
        try:
            return (await asyncio.to_thread(self._path(key).stat)).st_size
        except FileNotFoundError:
            raise ObjectNotFound(key) from None
