"""Token creation by an admin token."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.schemas.common import AnswerModel, StrictModel, Text
from app.schemas.evaluations import Assurance

Permission = Literal[
    "suite.write",
    "dataset.write",
    "scorer.write",
    "evaluation.write",
    "report.read",
    "report.export",
    "dataset.read_body",
    "peer.manage",
    "admin",
]


class TokenIn(StrictModel):
    """POST /api/v1/tokens."""

    name: Annotated[Text, Field(min_length=1, max_length=200)]
    permissions: list[Permission]
    kind: Literal["user", "runner", "peer"] = "user"
    assurance: Assurance | None = None


class TokenOut(AnswerModel):
    """A new token; `token` is shown once."""

    token_id: str
    name: str
    kind: str
    permissions: list[str]
    assurance: str
    token: str
