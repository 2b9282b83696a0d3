"""Peer bodies and answers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from app.schemas.common import AnswerModel, StrictModel, Text, Uuid


class PeerIn(StrictModel):
    """POST /api/v1/peers."""

    name: Annotated[Text, Field(min_length=1, max_length=200)]
    # Printable ASCII only (an IRI is sent percent-encoded): one rule in every regex dialect.
    callback_url: Annotated[str, Field(pattern=r"^https?://[!-~]+$", max_length=2000)]


class PeerCreated(AnswerModel):
    """A linked peer; `token` and `signing_secret` are shown once."""

    peer_id: str
    token: str
    signing_secret: str


class PeerOut(AnswerModel):
    """A peer as listed."""

    peer_id: str
    name: str
    callback_url: str
    status: str
    status_reason: str | None
    created_at: datetime


class PeerList(AnswerModel):
    """The project's peers."""

    peers: list[PeerOut]


class ByReport(StrictModel):
    """A report by its id."""

    report_id: Uuid


class ByEvaluation(StrictModel):
    """The report of an evaluation."""

    evaluation_id: Uuid


# POST /project/api/peer/report: exactly one of `report_id` or `evaluation_id`.
PeerReportIn = ByReport | ByEvaluation
