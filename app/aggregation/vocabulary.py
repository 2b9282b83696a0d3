"""The words cases and results use, and their codes: no numpy, so that the bundle verifier and
the tables can import them cheaply."""

from __future__ import annotations

from typing import Literal, get_args

CaseStatus = Literal[
    "pass", "fail", "error", "timeout", "cancelled", "skipped", "unsupported", "abstained"
]
CASE_STATUSES: tuple[str, ...] = get_args(CaseStatus)
# The statuses of a case that did not run to a score and is no error: it is inconclusive.
UNEXECUTED_STATUSES = CASE_STATUSES[3:]
STATUS_CODE = {status: code for code, status in enumerate(CASE_STATUSES)}
PASS, FAIL = STATUS_CODE["pass"], STATUS_CODE["fail"]
# docs/verdicts.md, section 2: the normative order of reasons for an unexecuted example.
REASONS = (
    "error",
    "stale",
    "timeout",
    "cancelled",
    "unsupported",
    "abstained",
    "skipped",
    "pending",
)
REASON_RANK = {reason: rank for rank, reason in enumerate(REASONS)}
SCORED_RANK = len(REASONS)
Assurance = Literal[
    "development_unisolated",
    "reported",
    "independently_observed",
    "human_attested",
    "platform_verified",
]
ASSURANCE_LEVELS: tuple[str, ...] = get_args(Assurance)
ASSURANCE_RANK = {level: rank for rank, level in enumerate(ASSURANCE_LEVELS)}
