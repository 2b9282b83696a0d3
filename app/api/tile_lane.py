"""Full tiles of the transparency log, answered before any other middleware.

A full tile never changes, so one this process already computed is sent as it is, with the
headers the routed endpoint and the edge give (`nosniff` included), counted and timed in the
same metrics as every request. It is the outermost layer: a bodiless GET of public, immutable
bytes needs neither the edge's body deadline nor the metrics middleware's wrapping (three
quarters of a tile's cost when it went through them). Anything else (a partial tile, a tile
not yet computed, an entry bundle asked for gzip-compressed, a bad path) goes down the
ordinary path."""

from __future__ import annotations

import re
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.edge import NOSNIFF
from app.api.state import NotStarted, state_of
from app.tlog import tiles

TILE_PATH = re.compile(r"/log/tile/(entries|[0-9]|[1-5][0-9]|6[0-3])/((?:x[0-9]{3}/)*[0-9]{3})")
TEMPLATE = "/log/tile/{level}/{index}"
HEADERS = [
    (b"content-type", b"application/octet-stream"),
    (b"cache-control", b"public, max-age=31536000, immutable"),
    NOSNIFF,
]


def _asks_gzip(scope: Scope) -> bool:
    """Whether the request's Accept-Encoding takes gzip."""
    for name, value in scope["headers"]:
        if name == b"accept-encoding":
            return tiles.accepts_gzip(value.decode("latin-1"))
    return False


class TileFastLane:
    """ASGI middleware: a full tile this process holds, sent at once."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        body, level, metrics = None, 0, None
        if scope["type"] == "http" and scope["method"] == "GET" and not scope["query_string"]:
            match = TILE_PATH.fullmatch(scope["path"])
            if match is not None:
                try:
                    state = state_of(scope["app"])
                    n, _ = tiles.parse_index(match.group(2))
                    level = -1 if match.group(1) == "entries" else int(match.group(1))
                    # An entry bundle asked for gzip-compressed takes the routed path.
                    if level >= 0 or not _asks_gzip(scope):
                        body = state.transparency.cached_tile(level, n)
                    metrics = state.metrics
                except (NotStarted, tiles.TileError):
                    body = None
        if body is None or metrics is None:
            await self.app(scope, receive, send)
            return
        headers = [*HEADERS, (b"content-length", str(len(body)).encode())]
        if level < 0:
            headers.append((b"vary", b"Accept-Encoding"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        counter, histogram = metrics.children("GET", TEMPLATE, 200)
        counter.inc()
        histogram.observe(time.perf_counter() - started)
