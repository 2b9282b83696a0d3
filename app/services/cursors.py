"""Opaque keyset cursors: a row's (timestamp, id), for pages newest first."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

RowT = TypeVar("RowT")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Microseconds since 1970 and the row id: every string of this form names a position (up to
# the year 2286), so a well-formed cursor is never refused, whoever made it.
CURSOR_PATTERN = r"^[0-9]{1,16}\.[0-9a-f]{32}$"


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
