"""A run of case lines checked together: the Python verifier's fast lane.

Case lines are most of a bundle, and checking each alone spends most of its time in the
interpreter. A run of lines that start as a canonical case line does (`{"assurance":`) is
parsed, and then checked column by column: one re-serialization of the whole run against its
bytes for canonical form, set and regex operations for the field types, pairwise comparison
for the case order, and one hash update for the stream. The lane only ever accepts: a run
holding any line the careful path (`Verifier.feed`) would fault, or one it does not judge here
(a byte order mark, a surrogate escape, a number at or beyond 2^53, an output that is not a
string and nests deeply, a key set or order other than a canonical case line's), goes through
`Verifier.feed` line by line. It adds to the facts and finds what that path would; tests hold
the two outcomes equal on every conformance bundle and on every fuzzed mutation.
"""

from __future__ import annotations

import itertools
import math
import operator
from typing import Any

import orjson

from app.bundles import lanes
from app.bundles.admission import Reading
from app.bundles.facts import Facts
from app.bundles.format import FIELD_TYPES, OPTIONAL, PHASES, REQUIRED
from app.bundles.results import Finding, Proven
from app.bundles.shapes import holds
from app.digest import merkle
from app.digest.canonical import es_number

CASE_START = b'{"assurance":'
CASE_PHASE = PHASES["case"]
_REQUIRED_KEYS = tuple(sorted(("kind", *REQUIRED["case"])))
_OPTIONAL_KEYS = OPTIONAL["case"]
# The columns a run is checked by (its check_id apart: one value for the whole run).
_COLUMNS = (
    "example_id",
    "repeat",
    "status",
    "score",
    "output_digest",
    "evidence_refs",
    "assurance",
    "scorer_digest",
)
_TYPES = FIELD_TYPES["case"]
# The key sequences of a canonical case line: the required keys, with or without an output and
# a trace reference, in sorted order (orjson keeps a line's own key order).
_KEY_ORDERS = frozenset(
    tuple(sorted((*_REQUIRED_KEYS, *extra)))
    for size in range(len(_OPTIONAL_KEYS) + 1)
    for extra in itertools.combinations(_OPTIONAL_KEYS, size)
)
_TRACE_KEYS = tuple(sorted(_TYPES["trace_ref"]["fields"]))
_KINDS = frozenset({"case", "baseline_case"})
_NONE = type(None)
_SCORE_TYPES = frozenset({_NONE, int, float})


def _scores_canonical(scores: list[Any]) -> bool:
    """Whether every score is null or a number written in its RFC 8785 form (orjson writes
    an integral float as 1.0 and large ones in its own exponent form; those go careful)."""
    kinds = set(map(type, scores))
    if not kinds <= _SCORE_TYPES:
        return False
    if float not in kinds:
        return True
    for score in {s for s in scores if type(s) is float}:
        if not math.isfinite(score) or es_number(score).encode() != orjson.dumps(score):
            return False
    return True


def _run_leaves(values: list[dict[str, Any]], columns: tuple[list[Any], ...]) -> list[bytes] | None:
    """The run's leaf hashes, or None when a case's measures need the careful path."""
    example_ids, repeats, statuses, scores, output_digests, refs, assurances, scorers = columns
    traces = [value.get("trace_ref") for value in values]
    taken, measures = _measure_texts(values)
    if not taken:
        return None
    return _leaves(
        example_ids,
        repeats,
        statuses,
        scores,
        output_digests,
        traces,
        refs,
        assurances,
        scorers,
        measures,
    )


def _measure_texts(values: list[dict[str, Any]]) -> tuple[bool, list[str | None] | None]:
    """(whether the lane takes the run's measures, each case's measures text or None when no
    case has any): measures of the wrong type, or numbers not in their RFC 8785 form or at or
    beyond 2^53, go careful."""
    found = [value.get("measures") for value in values]
    present = [m for m in found if m is not None]
    if not present:
        return True, None
    if not all(holds(_TYPES["measures"], m) for m in present):
        return False, None
    numbers = [v for m in present for v in m.values()]
    if not _scores_canonical(numbers) or not _small(numbers, [0]):
        return False, None
    return True, [merkle.measures_text(m) for m in found]


def _small(scores: list[Any], repeats: list[int]) -> bool:
    """Whether every score and repeat lies below 2^53 in magnitude."""
    numbers = [s for s in scores if s is not None]
    return max(repeats) < lanes.EXACT and (not numbers or max(map(abs, numbers)) < lanes.EXACT)


def accept(
    reading: Reading, facts: Facts, first_line: int, lines: list[bytes]
) -> list[Finding] | None:
    """Check a run of case lines numbered from `first_line`, add to the facts what the careful
    path would, and return the run's findings; None (and nothing added) when any line needs
    the careful path."""
    check = facts.check
    # A case after its check's labels is out of order: the careful path names it.
    if check is None or facts.last_label is not None:
        return None
    opened = lanes.open_run(reading, first_line, lines, CASE_PHASE, _KEY_ORDERS, _KINDS)
    if opened is None:
        return None
    joined, values = opened
    segments = _segments(facts, check.check_id, values)
    columns = None if segments is None else _columns(values)
    if segments is None or columns is None:
        return None
    example_ids, repeats = columns[0], columns[1]
    if not _traces_plain([value["trace_ref"] for value in values if "trace_ref" in value]):
        return None
    if not _in_run_order(facts.last_case, segments, example_ids, repeats):
        return None
    with_output = _outputs_matching(facts, lines, values)
    if with_output is None:
        return None
    leaves = _run_leaves(values, columns)
    if leaves is None:
        return None
    lanes.take(reading, joined, lines)
    for kind, start, end in segments:
        _record(
            facts, kind, check.check_id, first_line + start, values[start:end], leaves[start:end]
        )
    outputs = len(with_output)
    return [Proven("output_digest", outputs)] if outputs else []


def _outputs_matching(
    facts: Facts, lines: list[bytes], values: list[dict[str, Any]]
) -> list[int] | None:
    """The indexes of the run's cases that carry their output, when every output may be there
    and matches its digest; else None."""
    with_output = [index for index, value in enumerate(values) if "output" in value]
    if with_output and not (
        facts.may_hold_bodies
        and lanes.members_match(lines, values, with_output, "output", "output_digest")
    ):
        return None
    return with_output


def _segments(
    facts: Facts, check_id: str, values: list[dict[str, Any]]
) -> list[tuple[str, int, int]] | None:
    """The run's cases, then its baseline's cases, as (kind, start, end), when every line is of
    the open check (and a case's check has its evidence list); else None."""
    # Cases, then the baseline's cases (the careful path refuses a case after them).
    kinds = [value["kind"] for value in values]
    split = kinds.count("case")
    if split < len(kinds) and kinds.index("baseline_case") != split:
        return None
    check_ids = [value["check_id"] for value in values]
    if not lanes.all_strings(check_ids) or set(check_ids) != {check_id}:
        return None
    if split and check_id not in facts.evidence:
        return None
    return [
        (kind, start, end)
        for kind, start, end in (("case", 0, split), ("baseline_case", split, len(values)))
        if start < end
    ]


def _in_run_order(
    last: tuple[str, bytes, int] | None,
    segments: list[tuple[str, int, int]],
    example_ids: list[str],
    repeats: list[int],
) -> bool:
    """Whether each segment's cases follow the case before them in order."""
    for kind, start, end in segments:
        if not _in_order(last, kind, example_ids[start:end], repeats[start:end]):
            return False
        last = (kind, example_ids[end - 1].encode(), repeats[end - 1])
    return True


def _columns(values: list[dict[str, Any]]) -> tuple[list[Any], ...] | None:
    """The run's fields as columns, or None when a field does not hold its type of the
    format's table, or a number is one the careful path must judge (not canonical, or at or
    beyond 2^53)."""
    columns = {name: [value[name] for value in values] for name in _COLUMNS}
    if not all(lanes.column_holds(_TYPES[name], columns[name]) for name in _COLUMNS):
        return None
    scores = columns["score"]
    if not _scores_canonical(scores) or not _small(scores, columns["repeat"]):
        return None
    return tuple(columns[name] for name in _COLUMNS)


def _traces_plain(present: list[Any]) -> bool:
    """Whether every trace reference given is {"digest", "id"} with a digest and a string."""
    if not present:
        return True
    if set(map(type, present)) != {dict} or {tuple(t) for t in present} != {_TRACE_KEYS}:
        return False
    return set(map(type, (t["id"] for t in present))) == {str} and lanes.all_digests(
        [t["digest"] for t in present]
    )


def _in_order(
    last: tuple[str, bytes, int] | None, kind: str, example_ids: list[str], repeats: list[int]
) -> bool:
    """Whether cases of one kind follow the last case before them and each other in (example
    id, repeat) order; Python orders strings by code point, as their UTF-8 bytes order."""
    keys = list(zip(example_ids, repeats, strict=True))
    if last is not None:
        if last[0] == "baseline_case" and kind == "case":
            return False
        if last[0] == kind and not last[1:] < (example_ids[0].encode(), repeats[0]):
            return False
    return all(map(operator.lt, keys, itertools.islice(keys, 1, None)))


def _leaves(
    example_ids: list[str],
    repeats: list[int],
    statuses: list[str],
    scores: list[Any],
    output_digests: list[str | None],
    traces: list[Any],
    refs: list[list[str]],
    assurances: list[str],
    scorers: list[str],
    measures: list[str | None] | None = None,
) -> list[bytes]:
    """The cases' leaf hashes (app/digest/merkle.py: leaf_hash of case_record)."""
    return merkle.column_leaf_hashes(
        example_ids,
        repeats,
        statuses,
        scores,
        output_digests,
        [None if t is None else t["digest"] for t in traces],
        refs,
        assurances,
        scorers,
        measures,
    )


def _record(
    facts: Facts,
    kind: str,
    check_id: str,
    first_line: int,
    values: list[dict[str, Any]],
    leaves: list[bytes],
) -> None:
    """What the careful path adds to the facts for each of a run's cases of one kind."""
    facts.leaves.setdefault((kind, check_id), []).extend(leaves)
    traced = sum("trace_ref" in value for value in values)
    if traced:
        facts.traced_counts[(kind, check_id)] += traced
    if not all("output" in value for value in values):
        for index, value in enumerate(values):
            if "output" not in value and value["output_digest"] is not None:
                facts.absent_outputs[(kind, check_id, value["example_id"], value["repeat"])] = (
                    first_line + index,
                    value["output_digest"],
                )
    if kind == "case":
        facts.evidence[check_id][1].extend(_evidence_entries(values))
    last = values[-1]
    facts.last_case = (kind, last["example_id"].encode(), last["repeat"])
    if facts.keep_cases:
        facts.cases[kind].setdefault(check_id, []).extend(
            {k: v for k, v in value.items() if k != "output"} for value in values
        )


def _evidence_entries(values: list[dict[str, Any]]) -> list[str]:
    """The evidence each case adds to its check's list, in order: its output digest, its
    trace's digest, its evidence refs."""
    if not any(value["evidence_refs"] or "trace_ref" in value for value in values):
        return [value["output_digest"] for value in values if value["output_digest"]]
    entries: list[str] = []
    for value in values:
        if value["output_digest"]:
            entries.append(value["output_digest"])
        if value.get("trace_ref"):
            entries.append(value["trace_ref"]["digest"])
        entries.extend(value["evidence_refs"])
    return entries
