"""The HTTP server's side of the edge: uvicorn's httptools protocol with limits on request
heads. A head larger than `max_header_bytes` or with more than `max_header_fields` fields is
answered 431; a head not complete within `header_timeout_seconds` of the connection (or of
the previous answer) is answered 408, and a connection that sent nothing is closed. Without
them a client could send a 64 MiB header or drip one byte a minute and hold a connection."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.api.edge import NOSNIFF
from app.domain.errors import PROBLEM_BASE, PROBLEM_MEDIA_TYPE, render_problem
from app.platform.config import Settings


@dataclass(frozen=True, slots=True)
class HeadLimits:
    """What a request head may take: bytes (request line and fields), fields, and time."""

    max_bytes: int = 32 * 1024
    max_fields: int = 100
    timeout_seconds: float = 10.0

    @classmethod
    def from_settings(cls, settings: Settings) -> HeadLimits:
        """The limits the settings name."""
        return cls(
            settings.max_header_bytes, settings.max_header_fields, settings.header_timeout_seconds
        )


_SLUGS = {
    HTTPStatus.BAD_REQUEST: "bad-request",
    HTTPStatus.REQUEST_TIMEOUT: "request-timeout",
    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE: "request-header-fields-too-large",
}
# How long a refused connection's remaining input is read and dropped before it is closed.
LINGER_SECONDS = 2.0


class _HeadRefused(Exception):
    """Raised inside a parser callback to stop parsing a head that passed a limit."""


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head limits of `limits` (None: read from the
    environment's settings, as in each worker process of `evalbook serve --workers N`)."""

    limits: ClassVar[HeadLimits | None] = None
    _environment_limits: ClassVar[HeadLimits | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_limits = self.limits or self._limits_of_environment()
        self._in_head = True
        self._head_bytes = 0
        self._head_exact = 0
        self._head_fields = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._refusal: tuple[HTTPStatus, str] | None = None
        self._refused = False

    @classmethod
    def _limits_of_environment(cls) -> HeadLimits:
        if cls._environment_limits is None:
            cls._environment_limits = HeadLimits.from_settings(Settings())
        return cls._environment_limits

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A new connection has the head's time to send one."""
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Nothing left to time."""
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed the parser (uvicorn's own steps, with a refused head answered by its limit's
        status); a head still incomplete past the byte limit is refused (counted here, as the
        parser holds a long field until it ends). After a refusal, what comes is dropped."""
        if self._refused:
            return
        if self._in_head:
            self._head_bytes += len(data)
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self._refusal is not None:
                self._refuse(*self._refusal)
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        if (
            self._in_head
            and self._head_bytes > self.head_limits.max_bytes
            and not self.transport.is_closing()
        ):
            self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, self._too_large())

    def on_message_begin(self) -> None:
        """A new head starts: count it afresh, within the head's time."""
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = self._head_exact = self._head_fields = 0
        self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        """Count the request target into the head."""
        self._add_to_head(len(url), fields=0)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count a field into the head."""
        self._add_to_head(len(name) + len(value) + 4, fields=1)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """The head is in: its limits no longer apply."""
        self._in_head = False
        self._cancel_head_timer()
        super().on_headers_complete()

    def _too_large(self) -> str:
        return f"the request head passes {self.head_limits.max_bytes} bytes"

    def _add_to_head(self, size: int, fields: int) -> None:
        self._head_exact += size
        self._head_fields += fields
        if self._head_fields > self.head_limits.max_fields:
            self._refusal = (
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"the request has more than {self.head_limits.max_fields} header fields",
            )
            raise _HeadRefused
        if self._head_exact > self.head_limits.max_bytes:
            self._refusal = (HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, self._too_large())
            raise _HeadRefused

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(
                self.head_limits.timeout_seconds, self._head_timed_out
            )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self._head_bytes or self._head_exact:
            seconds = f"{self.head_limits.timeout_seconds:g}"
            self._refuse(HTTPStatus.REQUEST_TIMEOUT, f"the request head took more than {seconds} s")
        else:
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request it cannot parse, as every other refusal here: a
        problem document with `nosniff`, the connection closed after it."""
        self._refuse(HTTPStatus.BAD_REQUEST, msg)

    def _refuse(self, status: HTTPStatus, detail: str) -> None:
        """Answer a problem document and close the connection, lingering: the rest of what
        the client sends is read and dropped for a moment, so that closing with unread data
        (a reset) does not destroy the answer before the client reads it."""
        self._cancel_head_timer()
        self._in_head = False
        self._refused = True
        slug = _SLUGS[status]
        body = render_problem(
            {
                "type": PROBLEM_BASE + slug,
                "title": status.phrase,
                "status": int(status),
                "detail": detail,
            }
        )
        lines = [f"HTTP/1.1 {int(status)} {status.phrase}\r\n".encode("ascii")]
        for name, value in (*self.server_state.default_headers, NOSNIFF):
            lines.append(name + b": " + value + b"\r\n")
        lines.append(b"content-type: " + PROBLEM_MEDIA_TYPE.encode("ascii") + b"\r\n")
        lines.append(b"content-length: " + str(len(body)).encode("ascii") + b"\r\n")
        lines.append(b"connection: close\r\n\r\n")
        lines.append(body)
        self.transport.write(b"".join(lines))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


def protocol_for(limits: HeadLimits) -> type[GuardedHttpProtocol]:
    """The protocol class with these limits, for a server in this process."""
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"limits": limits})


# For `uvicorn.run(..., workers=N)`, which imports the protocol by name in each worker.
PROTOCOL_PATH = "app.api.serving:GuardedHttpProtocol"
