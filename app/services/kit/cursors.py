"""Opaque, checked keyset cursors (docs/api.md, "Cursors").

A cursor is a position and a check: `<position>.<check>`, where the check is the first 16 hex
digits of sha256 over the cursor's kind and position. Anything else (a typo, a truncated copy, a
cursor of another kind of list, a made-up position) is refused with a 400 before any query runs,
instead of answering some arbitrary page. The check is not a secret: a cursor only positions a
list the caller may read anyway, so it guards against mistakes, not against forgers."""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from app.domain.errors import BadRequest

RowT = TypeVar("RowT")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Long enough for an example id of 200 characters in hex and a repeat, with room to spare.
MAX_CURSOR = 2000
_LIST = re.compile(r"[0-9]{1,16}\.[0-9a-f]{32}")
_EXAMPLE = re.compile(r"(?:[0-9a-f]{2}){1,800}")
_LABEL = re.compile(r"[0-9]{1,4}\.[0-9]{1,10}")
_CASE = re.compile(r"(?:[0-9a-f]{2}){1,800}\.[0-9]{1,7}")
REFUSED = "cursor is not a cursor this service issued for this list (start again without it)"


def _check(kind: str, position: str) -> str:
    return hashlib.sha256(f"evalbook-cursor/{kind}/{position}".encode()).hexdigest()[:16]


def seal(kind: str, position: str) -> str:
    """The cursor of a position in a list of this kind."""
    return f"{position}.{_check(kind, position)}"


def unseal(kind: str, cursor: str, form: re.Pattern[str]) -> str:
    """The position a cursor of this kind names; 400 for anything this service did not issue."""
    position, _, check = cursor.rpartition(".")
    if (
        len(cursor) > MAX_CURSOR
        or not cursor.isascii()
        or form.fullmatch(position) is None
        or not hmac.compare_digest(check, _check(kind, position))
    ):
        raise BadRequest(REFUSED)
    return position


def encode_cursor(moment: datetime, row_id: uuid.UUID) -> str:
    """The cursor after the row with this (timestamp, id)."""
    micros = (moment - EPOCH) // timedelta(microseconds=1)
    return seal("list", f"{micros}.{row_id.hex}")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The position a list cursor names (400 for anything else)."""
    micros, row_id = unseal("list", cursor, _LIST).split(".")
    return EPOCH + timedelta(microseconds=int(micros)), uuid.UUID(hex=row_id)


def split_page(
    rows: list[RowT], limit: int, position: Callable[[RowT], tuple[datetime, uuid.UUID]]
) -> tuple[list[RowT], str | None]:
    """A page of `limit` rows from a query that asked for one more, and the next cursor."""
    page = rows[:limit]
    return page, encode_cursor(*position(page[-1])) if len(rows) > limit else None


def example_cursor(example_id: str) -> str:
    """The cursor after an example id (in a diff's example lists)."""
    return seal("example", example_id.encode().hex())


def example_after(cursor: str) -> str:
    """The example id an example cursor names (400 for anything else)."""
    return bytes.fromhex(unseal("example", cursor, _EXAMPLE)).decode("utf-8", "replace")


def case_cursor(example_id: str, repeat: int) -> str:
    """The cursor after a case (example id, repeat) in a check's cases."""
    return seal("case", f"{example_id.encode().hex()}.{repeat}")


def case_after(cursor: str) -> tuple[str, int]:
    """The (example id, repeat) a case cursor names (400 for anything else)."""
    encoded, repeat = unseal("case", cursor, _CASE).rsplit(".", 1)
    return bytes.fromhex(encoded).decode("utf-8", "replace"), int(repeat)


def label_cursor(check_index: int, position: int) -> str:
    """The cursor after a requested label (its check's place in the suite, its example's)."""
    return seal("label", f"{check_index}.{position}")


def label_after(cursor: str) -> tuple[int, int]:
    """The (check index, example position) a label cursor names (400 for anything else)."""
    check_index, position = unseal("label", cursor, _LABEL).split(".")
    return int(check_index), int(position)
