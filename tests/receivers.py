"""A real HTTP server on loopback that records the peer notifications it is sent."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Receiver:
    """A real HTTP server on loopback that records what it is sent."""

    fail_first: int = 0
    answer: int = 204
    location: str | None = None
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    attempts: int = 0
    server: ThreadingHTTPServer = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Bound now, on a port the kernel picks, and held: a free port looked up here and bound
        # only in serve() was once handed to the next receiver too (Address already in use).
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def serve(self) -> ThreadingHTTPServer:
        """Start answering, in a thread of its own; the server, to shut down."""
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.attempts += 1
                if receiver.attempts <= receiver.fail_first:
                    self.send_response(500)
                else:
                    receiver.received.append(
                        ({k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    self.send_response(receiver.answer)
                    if receiver.location is not None:
                        self.send_header("Location", receiver.location)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        return Handler
