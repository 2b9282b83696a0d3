"""The report body v1.0, the envelope and the report's representation (docs/report.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING
from typing import TYPE_CHECKING, Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from app.domain import results
from app.domain.vocabulary import CaseStatus
from app.schemas.base import StrictModel
from app.schemas.common import Uuid

Result = Literal["pass", "fail", "error", "inconclusive"]
CheckResultValue = Literal["pass", "fail", "error", "inconclusive", "missing", "stale"]
Status = Literal[CaseStatus, "inconclusive", "missing", "stale"]


class BodyModel(BaseModel):
    """Body parts: exactly the documented fields."""

    model_config = ConfigDict(extra="forbid")


class IdSlug(BodyModel):
    id: str
    slug: str


class SuiteRef(BodyModel):
    id: str
    name: str
    version: str
    digest: str


class DatasetRef(BodyModel):
    id: str
    name: str
    version: str
    digest: str


class ScorerRef(BodyModel):
    name: str
    version: str
    digest: str


class DecisionRule(BodyModel):
    rule: Literal["threshold", "interval", "non_inferiority", "superiority"]
    alpha: float
    margin: float
    correction: Literal["none", "bonferroni", "holm"]
    family: list[str]
    # The statistics rules (docs/verdicts.md, section 10): absent before the second edition.
    edition: int | None = None
    # Under re-evaluation spending: this report's look at its subject, and the alpha it used.
    look: int | None = None
    alpha_spent: float | None = None
    # Third edition: the next look's alpha, which the MDE and n_needed are computed at (a
    # re-run is the next look).
    alpha_next: float | None = None


def _body_model_of(
    value: type, name: str, without: tuple[str, ...] = (), **more: tuple[Any, Any]
) -> type[BodyModel]:
    """A body model with a domain value's fields (their names, types and defaults, in order)
    but those `without`, then `more`: the body's form is written once."""
    hints = get_type_hints(value)
    fields: dict[str, Any] = {
        field.name: (hints[field.name], ... if field.default is MISSING else field.default)
        for field in dataclasses.fields(value)
        if field.name not in without
    }
    fields.update(more)
    return create_model(name, __base__=BodyModel, **fields)


if TYPE_CHECKING:
    IntervalBody = BodyModel
else:
    IntervalBody = _body_model_of(results.Interval, "IntervalBody")


class CasesTree(BodyModel):
    """The RFC 6962 tree over a check's case records (absent from reports issued before it)."""

    count: int
    root: str


if TYPE_CHECKING:
    Comparison = BodyModel
else:
    # The check's comparison names its baseline's cases and report in two fields of its own
    # (a slice's does not).
    Comparison = _body_model_of(
        results.Comparison,
        "Comparison",
        without=("baseline",),
        baseline_cases=(CasesTree | None, None),
        baseline_report_digest=(str | None, None),
    )


class Coverage(BodyModel):
    expected: int
    executed: int
    missing: int


class Observation(BodyModel):
    code: str
    count: int | None = None
    # A number (design effect, shares), a list of example ids, or an object (mde, underpowered).
    detail: float | list[str] | dict[str, Any] | str | None = None
    slice: str | None = None


class SliceResult(BodyModel):
    name: str
    required: bool
    status: Status
    result: CheckResultValue
    score: float | None
    interval: IntervalBody | None
    comparison: Comparison | None
    coverage: Coverage


class CheckResultBody(BodyModel):
    check_id: str
    required: bool
    status: Status
    result: CheckResultValue
    aggregation: dict[str, Any]
    scorer_ref: ScorerRef
    assurance: str
    evidence_refs: list[str]
    evidence_manifest: bool
    score: float | None
    interval: IntervalBody | None
    comparison: Comparison | None
    explanation: str
    coverage: Coverage
    cases: CasesTree | None = None
    observations: list[Observation]
    slices: list[SliceResult]


class ReportBody(BodyModel):
    """The report body, schema version 1.0 (stored as its canonical bytes)."""

    schema_version: Literal["1.0"]
    producer: Literal["svc_evalbook"]
    organization: IdSlug
    project: IdSlug
    report_id: str
    evaluation_id: str
    subject: dict[str, Any]
    suite_ref: SuiteRef
    dataset_refs: list[DatasetRef]
    mode: Literal["gate", "experiment", "exploratory"]
    execution_mode: Literal["platform", "external", "local"]
    decision_rule: DecisionRule
    result: Result
    assurance: str
    evidence_complete: bool
    reasons: list[dict[str, Any]]
    checks: list[CheckResultBody]
    coverage: Coverage
    issued_at: str
    valid_until: str


class Envelope(BaseModel):
    """The mutable metadata beside a report."""

    status: Literal["current", "superseded"]
    superseded_by: str | None
    superseded_at: str | None
    superseded_reason: Literal["re_evaluation", "suite_version_activated"] | None
    expires_at: str
    expired: bool
    integrity: Literal["ok", "incident"]
    url: str
    attestation: str
    supersession_attestation: str | None
    log_index: int | None = Field(
        description="the index of the report's entry in the transparency log (null: issued "
        "before the log)"
    )
    log: str = Field(description="the entry, its inclusion proof and the newest checkpoint")


class ReportOut(BaseModel):
    """A report's representation everywhere: id, digest, body and envelope."""

    report_id: str
    digest: str
    body: ReportBody
    envelope: Envelope


class ReportList(BaseModel):
    """A page of reports, newest first."""

    reports: list[ReportOut]
    next_cursor: str | None


class ReportSummary(BaseModel):
    """A report in a summary list: the list's fields and the envelope, without the body."""

    report_id: str
    digest: str
    issued_at: str
    result: Result
    subject_digest: str
    mode: Literal["gate", "experiment", "exploratory"]
    valid_until: str
    envelope: Envelope


class ReportSummaryList(BaseModel):
    """A page of report summaries, newest first (`view=summary`)."""

    reports: list[ReportSummary]
    next_cursor: str | None


class ForSubjectOut(BaseModel):
    """The current, unexpired gate reports about one subject, one per suite."""

    subject_digest: str
    reports: list[ReportOut]


class VerifyIn(StrictModel):
    """POST /evaluations/api/reports/verify."""

    report_id: Uuid


class ResolveIn(StrictModel):
    """POST /evaluations/api/incidents/{id}/resolve: why the incident is closed (audited)."""

    reason: str = Field(min_length=1, max_length=2000)


class ResolvedOut(BaseModel):
    """A resolved incident: who closed it, when, and why (kept for ever)."""

    incident_id: int
    resolved_at: str
    actor: str
    reason: str


class VerifyOut(BaseModel):
    """The answer of a verification."""

    report_id: str
    verified: bool
    stored_digest: str
    computed_digest: str
    canonical: bool
    # Stored columns derived from the body that disagree with it (`reports.result`, ...).
    mismatches: list[str]
    # The parts that failed: digest, canonical, derived, attestation, cases, labels, outputs,
    # envelope.
    failed: list[str] = []
    # One sentence per failure, naming what failed.
    findings: list[str] = []
    checked_at: str


class IncidentOut(BaseModel):
    """An open incident: a report that no longer verifies."""

    incident_id: int
    report_id: str
    kind: str
    stored_digest: str
    computed_digest: str
    detail: str
    detected_at: str


class EvaluatorHealth(BaseModel):
    """The evaluator health view."""

    status: Literal["ok", "incidents"]
    open_incidents: list[IncidentOut]


class DsseSignature(BaseModel):
    """One signature of a DSSE envelope."""

    keyid: str
    sig: str


class DsseEnvelope(BaseModel):
    """A DSSE v1 envelope of an in-toto statement (base64 payload)."""

    payload: str
    payloadType: str
    signatures: list[DsseSignature]


class ForSubjectVsaOut(BaseModel):
    """forSubject?format=vsa: a signed SLSA VSA v1 per current report."""

    subject_digest: str
    attestations: list[DsseEnvelope]
