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
    "measure_missing",
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

# How a check's example values become its score, and what its suite decides by.
Method = Literal["all_pass", "pass_rate", "mean", "min", "quantile"]
# Which way a check's score improves (docs/verdicts.md, measures): "lower" mirrors every rule.
Better = Literal["higher", "lower"]
Rule = Literal["threshold", "interval", "non_inferiority", "superiority"]
Correction = Literal["none", "bonferroni", "holm"]
PASS_FAIL_METHODS = ("all_pass", "pass_rate")
# Rules that compare with a baseline, and the methods whose checks they compare.
COMPARATIVE_RULES = ("non_inferiority", "superiority")
COMPARATIVE_METHODS = ("pass_rate", "mean")
