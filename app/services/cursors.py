"""Opaque keyset cursors: a row's (timestamp, id), for pages newest first."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from app.errors import validation_error

RowT = TypeVar("RowT")


def encode_cursor(moment: datetime, row_id: uuid.UUID) -> str:
    """The cursor after the row with this (timestamp, id)."""
    raw = f"{moment.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The position a cursor names, or 422."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        moment, row_id = raw.split("|")
        return datetime.fromisoformat(moment), uuid.UUID(row_id)
    except (ValueError, UnicodeDecodeError):
        raise validation_error(("query", "cursor"), "not a cursor this service issued") from None


def split_page(
    rows: list[RowT], limit: int, position: Callable[[RowT], tuple[datetime, uuid.UUID]]
) -> tuple[list[RowT], str | None]:
    """A page of `limit` rows from a query that asked for one more, and the next cursor."""
    page = rows[:limit]
    return page, encode_cursor(*position(page[-1])) if len(rows) > limit else None
