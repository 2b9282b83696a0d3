"""What a case's measures may be: named numbers such as cost, latency and tokens
(docs/verdicts.md, section 12); ingestion and both bundle verifiers hold cases to it."""

from __future__ import annotations

import math
from typing import Any

from app.domain.identifiers import IDENTIFIER_RE

# A case names at most this many measures.
MAX_MEASURES = 16


def measures_problem(measures: Any) -> tuple[str | None, str] | None:
    """What is wrong with a case's `measures` (the measure it names, or None for the whole
    field, and the message), or None when they are absent or well formed: an object of at
    most MAX_MEASURES identifiers, each a finite number >= 0."""
    if measures is None:
        return None
    if type(measures) is not dict:
        return None, "an object of named numbers"
    if len(measures) > MAX_MEASURES:
        return None, f"at most {MAX_MEASURES} measures (this case names {len(measures)})"
    for name, value in measures.items():
        if IDENTIFIER_RE.fullmatch(name) is None:
            return name, "a measure's name is an identifier"
        if type(value) is not int and type(value) is not float:
            return name, "a measure is a finite number >= 0"
        if not math.isfinite(value) or value < 0:
            return name, f"a measure is a finite number >= 0, not {value}"
    return None
