"""A board's page (HTML): the ranking table, the rank-interval drawing and the sentence about
ties (docs/boards.md, section 4)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.deps import Reader
from app.api.routers.pages import PageRoute, WebReader
from app.api.web.board_chart import rank_chart
from app.api.web.render import page
from app.api.web.views import when
from app.services import board_issuance as service

router = APIRouter(include_in_schema=False, route_class=PageRoute)


@router.get("/boards/{board_id}")
async def board_page(
    request: Request, board_id: uuid.UUID, me: WebReader, reader_connection: Reader
) -> Response:
    """A board: each subject's rank and rank interval, drawn and tabled."""
    shown = await service.view(reader_connection, me.principal, board_id)
    return page(
        request,
        "board.html",
        {
            "me": me,
            "board": shown.board,
            "body": shown.body,
            "names": shown.names,
            "chart": rank_chart(shown.body, shown.names),
            "created": when(shown.board.created_at),
        },
    )
