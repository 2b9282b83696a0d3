"""The one way a batch of cases is validated: the lanes that take a common batch whole, then the
careful path that decides the rest.

The lanes only ever accept (tests hold their rows equal to the careful path's), so a batch gets
the same rows and the same first fault whichever way it goes; they stay because they are several
times faster at a million cases (docs/benchmarks.md, `bench.ingest_lanes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.digest.strictjson import parse_lines
from app.ingestion.columns import value_rows
from app.ingestion.lines import line_rows
from app.ingestion.rows import ValidatedBatch
from app.ingestion.validator import CaseValidator


def validate_batch(
    validator: CaseValidator, numbers: Sequence[int], batch: list[Any]
) -> ValidatedBatch:
    """A batch's rows, or a located problem at its first fault: `batch` holds NDJSON lines (as
    bytes, with their line numbers) when the validator reads NDJSON, else parsed cases (with
    their indexes in the body)."""
    cases = batch
    if validator.ndjson:
        if validator.lines_lane:
            validated = line_rows(validator, batch)
            if validated is not None:
                return validated
            validator.lines_lane = False
        cases = parse_lines(numbers, batch)
    return value_rows(validator, cases) or validator.careful_rows(numbers, cases)
