"""A loopback TCP proxy in front of the S3 endpoint, to take the store down mid-request."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable


class StoreOutageProxy:
    """Forwards to `target_port`; after `cut_after_bytes` sent upstream it drops every
    connection and refuses new ones until `restore()`."""

    def __init__(self, target_port: int, receive_buffer: int | None = None) -> None:
        self.target_port = target_port
        # The listener's SO_RCVBUF, which accepted sockets inherit (None: the system's).
        self.receive_buffer = receive_buffer
        self.port = 0
        self.sent = 0
        self.cut_after_bytes: int | None = None
        # Called at the cut instead of dropping connections (say, to stop the server itself).
        self.on_cut: Callable[[], None] | None = None
        self.down = False
        # Stalled: connections are accepted and held, and nothing is forwarded either way (a
        # store that hangs rather than refuses).
        self.stalled = False
        # Deaf: connections are accepted and never read (a store that stops reading): with a
        # small receive buffer, whoever sends more than a few KiB blocks in its send.
        self.deaf = False
        # Deaf mid-request: once this many bytes went upstream, no connection is read from
        # until `restore()` (set through `stop_reading(after_bytes=…)`).
        self.deaf_after_bytes: int | None = None
        self.hearing = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        # Accepted sockets inherit the listener's small receive buffer (set before listen).
        self.server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, start_serving=False
        )
        if self.receive_buffer is not None:
            for sock in self.server.sockets:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
        await self.server.start_serving()
        self.port = self.server.sockets[0].getsockname()[1]

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                if upstream:
                    self.sent += len(data)
                    if self.deaf_after_bytes is not None and self.sent > self.deaf_after_bytes:
                        # Stop reading mid-request: the sender's buffers fill and it blocks.
                        await self.hearing.wait()
                    if self.cut_after_bytes is not None and self.sent > self.cut_after_bytes:
                        if self.on_cut is not None:
                            self.cut_after_bytes = None
                            self.on_cut()
                        else:
                            await self.outage()
                            return
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.close()
            return
        if self.deaf:
            self.writers.add(writer)
            with contextlib.suppress(ConnectionError, OSError):
                await reader.read(1)  # returns only when the client goes away
            return
        if self.stalled:
            self.writers.add(writer)
            with contextlib.suppress(ConnectionError, OSError):
                while await reader.read(65536):
                    pass
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers |= {writer, up_writer}
        await asyncio.gather(
            self._pipe(reader, up_writer, upstream=True),
            self._pipe(up_reader, writer, upstream=False),
        )
        self.writers -= {writer, up_writer}

    async def outage(self) -> None:
        """The store goes away: live connections drop, new ones are refused."""
        self.down = True
        if self.server is not None:
            self.server.close()
            self.server = None
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def stall(self) -> None:
        """The store hangs: live connections drop, new ones are accepted and never answered."""
        self.stalled = True
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def stop_reading(self, after_bytes: int | None = None) -> None:
        """The store stops reading: live connections drop, new ones are accepted and never
        read from; with `after_bytes`, every connection stops being read once that many more
        bytes have gone upstream (in the middle of a request)."""
        if after_bytes is not None:
            self.hearing.clear()
            self.deaf_after_bytes = self.sent + after_bytes
            return
        self.deaf = True
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def restore(self) -> None:
        """The store comes back on the same port."""
        self.down = self.stalled = self.deaf = False
        self.deaf_after_bytes = None
        self.hearing.set()
        self.cut_after_bytes = None
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()
        if self.server is None:
            await self.start()

    async def stop(self) -> None:
        await self.outage()
