"""Token creation by an admin token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from app.domain.vocabulary import Assurance
from app.identity.permissions import PERMISSIONS
from app.schemas.base import AnswerModel, StrictModel
from app.schemas.common import ShortText

if TYPE_CHECKING:
    Permission = str
else:
    # A Literal of the one list (app/identity/permissions.py), so OpenAPI names every permission.
    Permission = Literal[PERMISSIONS]


class TokenIn(StrictModel):
    """POST /api/v1/tokens."""

    name: ShortText
    permissions: list[Permission]
    kind: Literal["user", "runner", "peer", "labeller"] = "user"
    assurance: Assurance | None = None


class TokenOut(AnswerModel):
    """A new token; `token` is shown once."""

    token_id: str
    name: str
    kind: str
    permissions: list[str]
    assurance: str
    token: str
