"""The transparency log: its newest checkpoint, tiles and entry bundles (public), witness
cosignatures, and a report's entry with its inclusion proof."""

from __future__ import annotations

import gzip
import uuid
from typing import Annotated

import orjson
from fastapi import APIRouter, Header, Path, Response

from app.api.access import ReportReader
from app.api.deps import Reader, State
from app.api.routers.route import EdgeRoute
from app.domain.errors import NotFound
from app.schemas.problems import AUTHENTICATED, BODY, problems
from app.schemas.transparency import CosignatureIn, CosignatureOut, ReportLog
from app.services import transparency as service
from app.tlog import tiles

router = APIRouter(tags=["transparency log"], route_class=EdgeRoute)
NOTE = "text/plain; charset=utf-8"
IMMUTABLE = "public, max-age=31536000, immutable"
LEVEL_PATTERN = r"^(entries|[0-9]|[1-5][0-9]|6[0-3])$"


@router.get(
    "/log/checkpoint",
    responses={
        200: {"content": {NOTE: {"schema": {"type": "string"}}}, "description": "C2SP note"},
        **problems(404, 500, 503),
    },
)
async def checkpoint(state: State) -> Response:
    """The newest checkpoint (C2SP tlog-checkpoint, signed note), with the witnesses'
    cosignatures; no token needed."""
    latest = await state.transparency.checkpoint()
    if latest is None:
        raise NotFound("the log has no checkpoint yet")
    return Response(latest[2], media_type=NOTE, headers={"Cache-Control": "no-cache"})


@router.get(
    "/log/tile/{level}/{index:path}",
    responses={
        200: {
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
            "description": "a hash tile (32 bytes a hash) or an entry bundle",
        },
        **problems(404, 422, 500, 503),
    },
)
async def tile(
    level: Annotated[str, Path(pattern=LEVEL_PATTERN)],
    index: Annotated[str, Path(max_length=200, description="x001/234 or x001/234.p/17")],
    state: State,
    accept_encoding: Annotated[str, Header()] = "",
) -> Response:
    """A hash tile or an entry bundle (C2SP tlog-tiles, height 8); no token needed. A tile
    never changes, full or partial (a partial one is served at any width the newest tree
    holds, for clients of earlier checkpoints); entry bundles are gzip-compressed when asked."""
    try:
        n, width = tiles.parse_index(index)
    except tiles.TileError as exc:
        raise NotFound(str(exc)) from None
    data = await state.transparency.tile(-1 if level == "entries" else int(level), n, width)
    headers = {"Cache-Control": IMMUTABLE}
    if level == "entries":
        headers["Vary"] = "Accept-Encoding"
        if tiles.accepts_gzip(accept_encoding):
            data = gzip.compress(data, compresslevel=6, mtime=0)
            headers["Content-Encoding"] = "gzip"
    return Response(data, media_type="application/octet-stream", headers=headers)


@router.post(
    "/log/cosignatures",
    response_model=CosignatureOut,
    responses={**problems(403, 404, 422, 500, 503), **BODY},
)
async def cosignatures(body: CosignatureIn, state: State) -> CosignatureOut:
    """A witness's cosignature of a checkpoint this log cut (C2SP tlog-cosignature/v1): kept
    only from a witness key the service is configured with."""
    size = await state.transparency.add_cosignatures(body.note.encode())
    return CosignatureOut(tree_size=size)


@router.get(
    "/evaluations/api/reports/{report_id:uuid}/log",
    response_model=ReportLog,
    responses={**AUTHENTICATED, **problems(404)},
)
async def report_log(
    report_id: uuid.UUID, principal: ReportReader, reader: Reader, state: State
) -> Response:
    """The report's log entry, its index, the newest checkpoint and the inclusion proof to it
    (both null until a checkpoint covers the entry)."""
    answer = await service.report_log(reader, principal, state.transparency, report_id)
    return Response(orjson.dumps(answer), media_type="application/json")
