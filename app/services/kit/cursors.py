"""Opaque keyset cursors: a row's (timestamp, id), for pages newest first."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from app.errors import BadRequest
from app.schemas.common import EXAMPLE_CURSOR_PATTERN

RowT = TypeVar("RowT")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def encode_cursor(moment: datetime, row_id: uuid.UUID) -> str:
    """The cursor after the row with this (timestamp, id)."""
    micros = (moment - EPOCH) // timedelta(microseconds=1)
    return f"{micros}.{row_id.hex}"


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The position a cursor (of CURSOR_PATTERN, checked at the edge) names."""
    micros, row_id = cursor.split(".")
    return EPOCH + timedelta(microseconds=int(micros)), uuid.UUID(hex=row_id)


def split_page(
    rows: list[RowT], limit: int, position: Callable[[RowT], tuple[datetime, uuid.UUID]]
) -> tuple[list[RowT], str | None]:
    """A page of `limit` rows from a query that asked for one more, and the next cursor."""
    page = rows[:limit]
    return page, encode_cursor(*position(page[-1])) if len(rows) > limit else None


def example_cursor(example_id: str) -> str:
    """The cursor after an example id (its UTF-8 bytes in hex; EXAMPLE_CURSOR_PATTERN)."""
    return example_id.encode().hex()


def example_after(cursor: str) -> str:
    """The example id an example cursor names (400 for a string not of the pattern)."""
    if re.fullmatch(EXAMPLE_CURSOR_PATTERN, cursor) is None:
        raise BadRequest("cursor is not a cursor this service issued")
    return bytes.fromhex(cursor).decode("utf-8", "replace")
