"""The tiles' ceiling: a minimal Starlette route serving the same tile bytes from memory, with
the headers the service sends (bench/tiles.py saves the bytes in STATIC_TILES, one file per
tile, named by its path with `/` as `_`)."""

from __future__ import annotations

import os
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

TILES = {
    "/" + path.name.replace("_", "/"): path.read_bytes()
    for path in Path(os.environ["STATIC_TILES"]).iterdir()
}
HEADERS = {"cache-control": "public, max-age=31536000, immutable"}


async def tile(request: Request) -> Response:
    """A saved tile's bytes, or 404."""
    body = TILES.get(request.url.path)
    if body is None:
        return Response(status_code=404)
    return Response(body, media_type="application/octet-stream", headers=HEADERS)


app = Starlette(routes=[Route("/log/tile/{rest:path}", tile)])
