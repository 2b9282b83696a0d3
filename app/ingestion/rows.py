"""The rows ingestion builds from cases, and the fields, words and limits they are checked
against (docs/verdicts.md, section 1)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from app.domain.measures import MAX_MEASURES, measures_problem
from app.domain.vocabulary import CASE_STATUSES

__all__ = ["MAX_MEASURES", "measures_problem"]

CASE_FIELDS = frozenset(
    {
        "check_id",
        "example_id",
        "repeat",
        "status",
        "score",
        "output",
        "output_digest",
        "evidence_refs",
        "trace_ref",
        "scorer_version",
        "assurance",
        "measures",
    }
)
STATUSES = frozenset(CASE_STATUSES)
SCORED_STATUSES = frozenset({"pass", "fail"})
MAX_EVIDENCE_REFS = 1000
# Inline outputs up to this many bytes stay in the case's row; longer ones go to
# `case_outputs`, off the rows that finishing scans (migration 0013).
INLINE_OUTPUT_BYTES = 128

# A `cases` row, in the order of `app.repositories.cases.CASE_COLUMNS`: evaluation, check id,
# example id, example position, repeat, status, score, inline output, output digest, output
# object key, evidence refs, trace id, trace digest, scorer version, assurance, leaf hash,
# measures (their canonical JSON, or None).
# A plain tuple (typed here, not a class) because a million of them go straight to COPY.
CaseRow = tuple[
    uuid.UUID,
    str,
    str,
    int,
    int,
    str,
    float | None,
    str | None,
    str | None,
    str | None,
    list[str] | None,
    str | None,
    str | None,
    str,
    str,
    bytes,
    str | None,
]
# A `case_outputs` row: an inline output longer than INLINE_OUTPUT_BYTES, apart from its case
# (evaluation, check id, example id, repeat, output).
LongOutput = tuple[uuid.UUID, str, str, int, str]


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    """A batch of cases validated: their rows in request order, the rows of their outputs too
    long for the case row, and the outputs to store as objects first (object key -> bytes)."""

    rows: list[CaseRow]
    long_outputs: list[LongOutput]
    uploads: dict[str, bytes]
