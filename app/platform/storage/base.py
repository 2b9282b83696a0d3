"""The object store interface the services use."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Protocol


class ObjectStoreUnavailable(Exception):
    """The store could not be reached or refused the operation; `retry_after` is how long
    finding that out may take (the 503's Retry-After)."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ObjectNotFound(Exception):
    """No object under that key."""


class MultipartUpload(Protocol):
    """An object written in parts; nothing is visible under its key until `complete`."""

    key: str

    async def write_part(self, data: bytes) -> None:
        """Append one part (every part but the last at least the store's minimum size)."""
        ...

    async def complete(self) -> None:
        """Make the object visible under its key."""
        ...

    async def abort(self) -> None:
        """Discard every part written; safe to call more than once."""
        ...


class ObjectStore(Protocol):
    """Keyed immutable blobs."""

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        """Store `data` under `key` (overwriting is allowed: keys are content-derived)."""
        ...

    async def get(self, key: str) -> bytes:
        """Read an object whole."""
        ...

    async def exists(self, key: str) -> bool:
        """True when an object is stored under `key`."""
        ...

    async def delete(self, key: str) -> None:
        """Remove an object (no error when absent)."""
        ...

    async def ping(self) -> None:
        """Raise ObjectStoreUnavailable unless the store answers."""
        ...

    async def begin_upload(self, key: str, content_type: str) -> MultipartUpload:
        """Start a multipart upload to `key`."""
        ...

    async def sweep_uploads(self, prefix: str, older_than: timedelta) -> int:
        """Abort uploads under `prefix` started longer ago than `older_than`; how many."""
        ...

    def stream(self, key: str, chunk_bytes: int = 1 << 20) -> AsyncIterator[bytes]:
        """Read an object in chunks (ObjectNotFound before the first chunk when absent)."""
        ...

    async def size(self, key: str) -> int:
        """The stored size of an object."""
        ...
