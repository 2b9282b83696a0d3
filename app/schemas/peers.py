"""Peer bodies and answers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from app.schemas.base import AnswerModel, StrictModel
from app.schemas.common import ShortText, Uuid


class PeerIn(StrictModel):
    """POST /api/v1/peers."""

    name: ShortText
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


class PeerReportIn(StrictModel):
    """POST /project/api/peer/report: exactly one of `report_id` or `evaluation_id`."""

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["report_id"]}, {"required": ["evaluation_id"]}]}
    )

    report_id: Uuid | SkipJsonSchema[None] = None
    evaluation_id: Uuid | SkipJsonSchema[None] = None

    @model_validator(mode="before")
    @classmethod
    def _absent_not_null(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for field in ("report_id", "evaluation_id"):
                if field in data and data[field] is None:
                    raise ValueError(f"leave {field} out rather than send null")
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> PeerReportIn:
        if (self.report_id is None) == (self.evaluation_id is None):
            raise ValueError("send exactly one of report_id or evaluation_id")
        return self
