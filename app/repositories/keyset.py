"""Newest-first keyset paging over a (timestamp, id) pair, shared by the list queries."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, and_, or_

SelectT = TypeVar("SelectT", bound=Select[*tuple[Any, ...]])


def newest_first(
    query: SelectT,
    moment: Any,
    row_id: Any,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> SelectT:
    """`query` ordered by (moment, id) descending, from after the `after` position, `limit` rows."""
    if after is not None:
        last_moment, last_id = after
        query = query.where(
            or_(moment < last_moment, and_(moment == last_moment, row_id < last_id))
        )
    return query.order_by(moment.desc(), row_id.desc()).limit(limit)
