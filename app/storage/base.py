"""The object store interface the services use."""

from __future__ import annotations

from typing import Protocol


class ObjectStoreUnavailable(Exception):
    """The store could not be reached or refused the operation."""


class ObjectNotFound(Exception):
    """No object under that key."""


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
