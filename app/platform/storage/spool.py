"""A multipart upload's parts held on this machine while they are sent to the store."""

from __future__ import annotations

import asyncio
import os
import tempfile

from app.platform.storage.base import MultipartUpload


class SpooledParts:
    """Takes a multipart upload's parts into a temporary file and sends them to a real upload
    as they arrive (`send_to` follows the writer): what writes them (an export reading the
    database) never waits on the store, and once the last part is written the sending goes
    on without it, holding no database connection. The page cache keeps recent parts in
    memory; a stalled store costs disk, not memory."""

    key = "spool"

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115
        self.parts: list[tuple[int, int]] = []
        self.size = 0
        self.completed = False
        self._changed = asyncio.Event()

    async def write_part(self, data: bytes) -> None:
        """Keep the next part."""
        os.pwrite(self.file.fileno(), data, self.size)
        self.parts.append((self.size, len(data)))
        self.size += len(data)
        self._changed.set()

    async def complete(self) -> None:
        """The last part is written."""
        self.completed = True
        self._changed.set()

    async def abort(self) -> None:
        """Drop the parts."""
        self.close()

    async def send_to(self, upload: MultipartUpload) -> None:
        """Write every part, in order, to `upload` as it is written, until the spool is
        complete (the caller completes the upload)."""
        sent = 0
        while True:
            while sent < len(self.parts):
                offset, size = self.parts[sent]
                await upload.write_part(os.pread(self.file.fileno(), size, offset))
                sent += 1
            if self.completed:
                return
            self._changed.clear()
            await self._changed.wait()

    def close(self) -> None:
        """Drop the spool."""
        self.file.close()
