"""A report's reasons in words, the same on the pages, in the gate's summary and after an
import: the check named as a name, what happened to it, and why when the body says."""

from __future__ import annotations

import re
from typing import Any

# An explanation's own opening status word ("Failed: score …"), which the sentence has said.
_STATUS_WORD = re.compile(r"^(?:Pass|Passed|Fail|Failed|Error|Inconclusive): ")

_RESULT_WORDS = {
    "fail": "failed",
    "error": "ended in an error",
    "inconclusive": "is inconclusive",
    "missing": "has no cases",
    "stale": "is stale",
}


def reason_sentence(reason: dict[str, Any], body: dict[str, Any] | None = None) -> str:
    """One sentence for one entry of a report's `reasons`."""
    code = str(reason.get("code", ""))
    check = reason.get("check_id", "")
    if code == "evidence_incomplete":
        missing, undigested = reason.get("missing", 0), reason.get("undigested", 0)
        parts = [f"{missing} expected example(s) were not executed"] if missing else []
        parts += [f"{undigested} scored case(s) carry no output digest"] if undigested else []
        return (
            f'The evidence for the check "{check}" is incomplete: '
            f"{' and '.join(parts) or 'cases are missing'}. A check may pass below full "
            "coverage (its min_coverage), but a report passes only on complete evidence, so "
            "it is inconclusive."
        )
    if code == "measure_missing":
        missing = reason.get("missing", 0)
        return (
            f'The measure check "{check}" lacks its measure on {missing} scored example(s): '
            "an example counts for a measure only when every scored repeat carries it, so the "
            "missing ones are unexecuted for it (measure_missing)."
        )
    if code.startswith("check_"):
        result = code.removeprefix("check_")
        sentence = f'The required check "{check}" {_RESULT_WORDS.get(result, f"is {result}")}'
        check_body = next(
            (c for c in (body or {}).get("checks", []) if c.get("check_id") == check), None
        )
        explanation = _STATUS_WORD.sub("", (check_body or {}).get("explanation") or "")
        return f"{sentence}: {explanation}" if explanation else f"{sentence}."
    return str(reason)
