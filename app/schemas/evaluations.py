"""Evaluation bodies and answers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from app.schemas.common import (
    SUBJECT_DIGEST_PATTERN,
    AnswerModel,
    Digest,
    Identifier,
    JSONValue,
    StrictModel,
)

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
Mode = Literal["gate", "experiment", "exploratory"]
ExecutionMode = Literal["platform", "external", "local"]
CaseStatus = Literal[
    "pass", "fail", "error", "timeout", "cancelled", "skipped", "unsupported", "abstained"
]
Assurance = Literal[
    "development_unisolated",
    "reported",
    "independently_observed",
    "human_attested",
    "platform_verified",
]


class SuiteRefIn(StrictModel):
    """Which suite version to run: the active one unless `version` is given."""

    name: Identifier
    version: Identifier | None = None


class EvaluationStartIn(StrictModel):
    """POST /api/v1/evaluations."""

    subject: dict[str, JSONValue]
    suite: SuiteRefIn
    mode: Mode
    execution_mode: ExecutionMode
    baseline_evaluation_id: Annotated[str, Field(pattern=UUID_PATTERN)] | None = None

    @field_validator("subject")
    @classmethod
    def _subject_has_digest(cls, subject: dict[str, Any]) -> dict[str, Any]:
        import re

        digest = subject.get("digest")
        if not isinstance(digest, str) or re.fullmatch(SUBJECT_DIGEST_PATTERN, digest) is None:
            raise ValueError('subject.digest must be "<algorithm>:<lowercase hex>"')
        return subject


class SuiteRefOut(AnswerModel):
    """The frozen suite version an evaluation runs."""

    id: str
    name: str
    version: str
    digest: str


class EvaluationStartOut(AnswerModel):
    """Answer of a start."""

    evaluation_id: str
    status: Literal["running", "finished", "cancelled"]
    suite_ref: SuiteRefOut
    expected_cases: int


class CheckCounts(AnswerModel):
    """Cases received for one check, by status."""

    check_id: str
    expected: int
    received: int
    by_status: dict[str, int]


class EvaluationOut(AnswerModel):
    """GET /api/v1/evaluations/{id}."""

    evaluation_id: str
    status: Literal["running", "finished", "cancelled"]
    suite_ref: SuiteRefOut
    subject: dict[str, Any]
    mode: Mode
    execution_mode: ExecutionMode
    baseline_evaluation_id: str | None
    expected_cases: int
    received_cases: int
    checks: list[CheckCounts]
    created_at: datetime
    finished_at: datetime | None


class TraceRefIn(StrictModel):
    """A trace kept by the trace store: its id and digest."""

    id: Annotated[str, Field(min_length=1, max_length=200)]
    digest: Digest


class CaseIn(StrictModel):
    """One case (documentation model: the ingestion path validates the same rules by hand)."""

    check_id: Identifier
    example_id: Identifier
    repeat: Annotated[int, Field(ge=0)]
    status: CaseStatus
    score: float | None = None
    output: JSONValue | None = None
    output_digest: Digest | None = None
    evidence_refs: list[Digest] | None = None
    trace_ref: TraceRefIn | None = None
    scorer_version: Identifier | None = None
    assurance: Assurance | None = None


class CaseBatchIn(StrictModel):
    """POST .../cases as JSON."""

    cases: list[CaseIn]


class CaseBatchOut(AnswerModel):
    """Answer of a case batch: new cases stored, identical re-sends."""

    accepted: int
    unchanged: int
