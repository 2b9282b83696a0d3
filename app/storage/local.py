"""A local directory object store (the embedded default)."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from app.storage.base import ObjectNotFound, ObjectStoreUnavailable


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
