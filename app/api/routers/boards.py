"""Boards: make one from the current gate reports, read one, list them, its signed statement
and its place in the transparency log (docs/boards.md)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import IO, Annotated

import orjson
from fastapi import APIRouter, Query, Response, status
from fastapi.responses import StreamingResponse

from app.api.access import BoardWriter, ReportExporter, ReportReader
from app.api.deps import Reader, Session, State
from app.api.routers.keys import envelope_responses
from app.api.routers.params import PageLimit
from app.api.routers.route import EdgeRoute
from app.bundles.board_format import BOARD_MEDIA_TYPE
from app.digest.signing import ENVELOPE_MEDIA_TYPE
from app.domain.identifiers import IDENTIFIER_PATTERN
from app.schemas.boards import BoardIn, BoardLog, BoardOut, BoardPage
from app.schemas.common import Cursor
from app.schemas.problems import AUTHENTICATED, BODY, LISTED, problems
from app.services import board_bundles as bundle_service
from app.services import board_issuance as service

router = APIRouter(
    prefix="/evaluations/api/boards",
    tags=["boards"],
    route_class=EdgeRoute,
    responses=AUTHENTICATED,
)
BOARD = "/{board_id:uuid}"


def _json(answer: object, status_code: int = 200) -> Response:
    return Response(orjson.dumps(answer), status_code=status_code, media_type="application/json")


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=BoardOut,
    responses={**problems(404), **BODY},
)
async def create_board(
    body: BoardIn, principal: BoardWriter, session: Session, state: State
) -> Response:
    """Rank the current gate reports of a suite version on one check: signed, stored and
    logged, never changed after."""
    asked = service.BoardRequest(body.suite, body.version, body.check_id, body.subjects, body.alpha)
    made = await service.create(
        session, principal, state.suite_cache, state.signer, asked, state.reader_pool
    )
    return _json(made, status.HTTP_201_CREATED)


@router.get("", response_model=BoardPage, responses={**LISTED, **problems(404)})
async def list_boards(
    principal: ReportReader,
    session: Session,
    suite: Annotated[str | None, Query(pattern=IDENTIFIER_PATTERN)] = None,
    cursor: Annotated[Cursor | None, Query()] = None,
    limit: PageLimit = 50,
) -> Response:
    """The project's boards, newest first (of one suite with `suite`), without their bodies."""
    return _json(await service.page(session, principal, suite, cursor, limit))


@router.get(BOARD, response_model=BoardOut, responses=problems(404))
async def get_board(board_id: uuid.UUID, principal: ReportReader, reader: Reader) -> Response:
    """A board with its canonical body."""
    return _json(service.served(await service.read(reader, principal, board_id)))


@router.get(BOARD + "/attestation", responses=envelope_responses("the board's statement"))
async def board_attestation(
    board_id: uuid.UUID, principal: ReportReader, reader: Reader
) -> Response:
    """The board's signed in-toto statement (predicate https://evalbook.dev/board/v1)."""
    board = await service.read(reader, principal, board_id)
    return Response(content=board.envelope, media_type=ENVELOPE_MEDIA_TYPE)


@router.get(BOARD + "/log", response_model=BoardLog, responses=problems(404))
async def board_log(
    board_id: uuid.UUID, principal: ReportReader, reader: Reader, state: State
) -> Response:
    """The board's log entry, its index, the newest checkpoint and the inclusion proof to it
    (both null until a checkpoint covers the entry)."""
    return _json(await service.board_log(reader, principal, state.transparency, board_id))


@router.post(
    BOARD + "/bundle",
    responses={
        200: {
            "content": {BOARD_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
            "description": "the board bundle: gzip JSON Lines (docs/boards.md, Proof)",
        },
        **problems(404),
    },
)
async def board_bundle(
    board_id: uuid.UUID, principal: ReportExporter, session: Session, state: State
) -> StreamingResponse:
    """The board with its proof: its statement and log proof, the suite version, and each
    ranked report with every case of the board's check, for both verifiers."""
    built = await bundle_service.build(session, principal, state.transparency, board_id)
    return StreamingResponse(
        _chunks(built.file),
        media_type=BOARD_MEDIA_TYPE,
        headers={
            "Content-Length": str(built.size),
            "Content-Disposition": f'attachment; filename="board-{board_id}.jsonl.gz"',
            "EvalBook-Bundle-Digest": built.digest,
        },
    )


async def _chunks(file: IO[bytes]) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(file.read, 1 << 20):
            yield chunk
    finally:
        file.close()
