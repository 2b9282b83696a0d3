"""The case-proof answer (documentation of what the endpoint writes)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class CaseRecord(BaseModel):
    """The fields a case commits to; its canonical JSON is the Merkle leaf's input."""

    assurance: str
    evidence_refs: list[str]
    example_id: str
    output_digest: str | None
    repeat: int
    score: float | None
    scorer_digest: str
    status: str
    trace_digest: str | None


class CaseProof(BaseModel):
    """One case and the RFC 6962 section 2.1.1 audit path from its leaf to the cases root."""

    report_id: str
    check_id: str
    baseline: bool
    record: CaseRecord
    leaf_index: int
    tree_size: int
    root: str = Field(description="the check's cases.root (or comparison.baseline_cases.root)")
    audit_path: list[str] = Field(description="sha256:<hex> nodes, nearest the leaf first")
    output: Any = Field(default=None, description="the case's output (with dataset.read_body)")
