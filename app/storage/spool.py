"""A multipart upload's parts held on this machine until they are sent to the store."""

from __future__ import annotations

import tempfile

from app.storage.base import MultipartUpload

# Parts kept in memory before the spool moves to a temporary file.
MEMORY_BYTES = 16 * 1024 * 1024


class SpooledParts:
    """Takes a multipart upload's parts (in memory up to `memory_bytes`, then in a temporary
    file) and sends them to a real upload later: what writes them (an export reading the
    database) never waits on the store, and what sends them holds no database connection."""

    key = "spool"

    def __init__(self, memory_bytes: int = MEMORY_BYTES) -> None:
        self.file = tempfile.SpooledTemporaryFile(max_size=memory_bytes)  # noqa: SIM115
        self.sizes: list[int] = []

    async def write_part(self, data: bytes) -> None:
        """Keep the next part."""
        self.file.write(data)
        self.sizes.append(len(data))

    async def complete(self) -> None:
        """Nothing to assemble here: `send_to` does."""

    async def abort(self) -> None:
        """Drop the parts."""
        self.close()

    async def send_to(self, upload: MultipartUpload) -> None:
        """Write every part, in order, to `upload` (the caller completes it)."""
        self.file.seek(0)
        for size in self.sizes:
            await upload.write_part(self.file.read(size))

    def close(self) -> None:
        """Drop the spool."""
        self.file.close()
