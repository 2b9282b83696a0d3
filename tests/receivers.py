"""A real HTTP server on loopback that records the peer notifications it is sent."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import free_port


@dataclass
class Receiver:
    """A real HTTP server on loopback that records what it is sent."""

    fail_first: int = 0
    answer: int = 204
    location: str | None = None
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    attempts: int = 0
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def serve(self) -> ThreadingHTTPServer:
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

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server
