"""Token creation by an admin token."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from app.schemas.common import AnswerModel, StrictModel


class TokenIn(StrictModel):
    """POST /api/v1/tokens."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    permissions: list[str]
    kind: str = "user"
    assurance: str | None = None


class TokenOut(AnswerModel):
    """A new token; `token` is shown once."""

    token_id: str
    name: str
    kind: str
    permissions: list[str]
    assurance: str
    token: str
