"""Cases from what a request sent to the typed rows that are stored: validation against the
frozen suite, canonical outputs, and each case's leaf hash.

Pure: no web, database or object store. `validate_batch` is the one way in; the caller stores
the outputs it returns as objects, then the rows.
"""

from __future__ import annotations

from app.ingestion.batch import validate_batch
from app.ingestion.rows import INLINE_OUTPUT_BYTES, CaseRow, LongOutput, ValidatedBatch
from app.ingestion.validator import CaseValidator, ScorerInfo

__all__ = [
    "INLINE_OUTPUT_BYTES",
    "CaseRow",
    "CaseValidator",
    "LongOutput",
    "ScorerInfo",
    "ValidatedBatch",
    "validate_batch",
]
