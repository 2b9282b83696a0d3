"""Query parameters several endpoints declare alike."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from app.schemas.common import IDENTIFIER_PATTERN, MAX_PAGE

# A list page's size.
PageLimit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
# The name a list of definitions is narrowed to.
NameFilter = Annotated[str | None, Query(pattern=IDENTIFIER_PATTERN)]
