"""The app served by a real uvicorn in the test's event loop, and a raw keep-alive client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import h11
import uvicorn
from fastapi import FastAPI

from app.api.serving import HeadLimits, protocol_for
from tests.conftest import free_port


@asynccontextmanager
async def uvicorn_serving(app: FastAPI, limits: HeadLimits | None = None) -> AsyncIterator[int]:
    """Serve `app` (lifespan included) on a free loopback port as `evalbook serve` does (the
    guarded protocol, with `limits` or the defaults); yields the port."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        http=protocol_for(limits or HeadLimits()),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(30):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.05)
        yield port
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)


@dataclass
class Answer:
    """One HTTP response read off the connection."""

    status: int
    headers: dict[str, str]
    body: bytes


class KeepAliveConnection:
    """One TCP connection carrying HTTP/1.1 requests one after another (h11), so a test can
    tell whether the server kept it open after an answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(our_role=h11.CLIENT)

    @classmethod
    async def open(cls, port: int) -> KeepAliveConnection:
        """Connect to the served app."""
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> Answer:
        """Send one request and read its whole answer; fails if the server closed the socket."""
        if self.http.our_state is h11.DONE:
            self.http.start_next_cycle()
        fields = [("host", "127.0.0.1"), ("content-length", str(len(body)))]
        fields += list((headers or {}).items())
        self.writer.write(self.http.send(h11.Request(method=method, target=path, headers=fields)))
        self.writer.write(self.http.send(h11.Data(data=body)) if body else b"")
        self.writer.write(self.http.send(h11.EndOfMessage()))
        await self.writer.drain()
        status, answer_headers, chunks = 0, {}, []
        while True:
            event = self.http.next_event()
            if event is h11.NEED_DATA:
                data = await asyncio.wait_for(self.reader.read(65536), 30)
                self.http.receive_data(data)
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                answer_headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return Answer(status, answer_headers, b"".join(chunks))
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the server closed the connection")

    @property
    def kept_open(self) -> bool:
        """True when neither side has asked to close the connection."""
        return (
            self.http.their_state is not h11.MUST_CLOSE
            and self.http.our_state is not h11.MUST_CLOSE
        )

    async def close(self) -> None:
        """Close the socket."""
        self.writer.close()
        await self.writer.wait_closed()
