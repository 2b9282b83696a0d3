"""The query parameters of the hot report reads, declared once: the routed endpoints take them
as query models and the fast lane validates a request's query with the same models."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from app.domain.reports import ReportFilters
from app.schemas.common import MAX_PAGE, Cursor, Text


class ReportListQuery(BaseModel):
    """`GET /evaluations/api/reports`: filters, page size, cursor and view."""

    subject_digest: Annotated[Text | None, Field(max_length=300)] = None
    suite: Annotated[Text | None, Field(max_length=200)] = None
    result: Literal["pass", "fail", "error", "inconclusive"] | None = None
    status: Literal["current", "superseded"] | None = None
    mode: Literal["gate", "experiment", "exploratory"] | None = None
    subject: Annotated[
        Text | None,
        Field(
            min_length=1,
            max_length=200,
            description="text in the subject as sent (its name, model or digest), any case",
        ),
    ] = None
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50
    cursor: Cursor | None = None
    view: Annotated[
        Literal["full", "summary"],
        Field(description="summary: each report's list fields and envelope, without its body"),
    ] = "full"

    def filters(self) -> ReportFilters:
        """What the list is narrowed to."""
        return ReportFilters(
            self.subject_digest, self.suite, self.result, self.status, self.mode, self.subject
        )


class ForSubjectQuery(BaseModel):
    """`GET /evaluations/api/reports/forSubject`: the subject, expired or not, and the form."""

    digest: Annotated[Text, Field(min_length=1, max_length=300)]
    include_expired: bool = False
    format: Annotated[
        Literal["json", "vsa"],
        Field(description="vsa: one signed SLSA Verification Summary Attestation per report"),
    ] = "json"
