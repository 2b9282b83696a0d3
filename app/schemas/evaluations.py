"""Evaluation bodies and answers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, SkipValidation, StringConstraints

from app.digest.strictjson import MAX_SAFE_INTEGER
from app.domain.identifiers import SUBJECT_DIGEST_PATTERN
from app.domain.vocabulary import Assurance, CaseStatus
from app.schemas.base import AnswerModel, StrictModel
from app.schemas.common import (
    JSON_INT,
    AnyJSON,
    Digest,
    Identifier,
    SafeFloat,
    ShortText,
    Uuid,
)

Mode = Literal["gate", "experiment", "exploratory"]
ExecutionMode = Literal["platform", "external", "local"]


class SuiteRefIn(StrictModel):
    """Which suite version to run: the active one unless `version` is given."""

    name: Identifier
    version: Identifier | None = None


class SubjectIn(StrictModel):
    """What is evaluated: its digest, and any other fields the caller keeps with it."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, AnyJSON]

    digest: Annotated[str, StringConstraints(pattern=SUBJECT_DIGEST_PATTERN)] = Field(
        description='"<algorithm>:<lowercase hex>", for example a git commit "sha1:4f1c…"'
    )


class EvaluationStartIn(StrictModel):
    """POST /api/v1/evaluations."""

    subject: SubjectIn
    suite: SuiteRefIn
    mode: Mode
    execution_mode: ExecutionMode
    baseline_evaluation_id: Uuid | None = None


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

    id: ShortText
    digest: Digest


class CaseIn(StrictModel):
    """One case (documentation model: the ingestion path validates the same rules by hand)."""

    check_id: Identifier
    example_id: Identifier
    repeat: Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER), JSON_INT]
    status: CaseStatus
    score: SafeFloat | None = None
    output: AnyJSON | None = None
    output_digest: Digest | None = None
    evidence_refs: list[Digest] | None = None
    trace_ref: TraceRefIn | None = None
    scorer_version: Identifier | None = None
    assurance: Assurance | None = None


class CaseBatchIn(StrictModel):
    """POST .../cases as JSON: the envelope is validated here, each case by the ingestion path
    (which names the refused case by its index, as the NDJSON form names the line)."""

    cases: list[SkipValidation[CaseIn]]


class CaseBatchOut(AnswerModel):
    """Answer of a case batch: new cases stored, identical re-sends."""

    accepted: int
    unchanged: int
