"""Query parameters several endpoints declare alike."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from pydantic import BaseModel, Field

from app.domain.identifiers import IDENTIFIER_PATTERN
from app.schemas.common import MAX_PAGE, Cursor

# A list page's size.
PageLimit = Annotated[int, Query(ge=1, le=MAX_PAGE)]


class NamedPage(BaseModel):
    """A page of a definitions list: narrowed to one name or not, its size, and its cursor."""

    name: Annotated[str | None, Field(pattern=IDENTIFIER_PATTERN)] = None
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50
    cursor: Cursor | None = None


NamedPageQuery = Annotated[NamedPage, Query()]
