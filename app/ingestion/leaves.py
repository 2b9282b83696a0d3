"""The leaf hashes of a batch the column lane takes (app/digest/merkle.py: leaf_hash of
case_record), each case's measures written into its record as the careful path writes them."""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any

import orjson

from app.digest.canonical import es_number
from app.digest.merkle import (
    LEAF_INPUT,
    joined_leaf_hashes,
    json_strings,
    measures_text,
    plain,
    with_measures,
)
from app.digest.strictjson import MAX_SAFE_INTEGER
from app.domain.identifiers import IDENTIFIER_RE
from app.domain.measures import MAX_MEASURES

_NUMBER_TYPES = frozenset({int, float})
# A number orjson writes with an exponent (`:1e+16`, `:1e-7`), which RFC 8785 writes otherwise
# in part; names are identifiers, so a number follows each colon.
_EXPONENT = re.compile(rb":[-0-9.]*[eE]")

if TYPE_CHECKING:
    from app.ingestion.columns import CaseColumns
    from app.ingestion.validator import ScorerInfo

# app/digest/merkle.py's leaf input for a case without evidence refs or trace; the example id is
# written by orjson unless the whole batch's ids are plain.
_LEAF_INPUT = LEAF_INPUT.replace('"evidence_refs":%s', '"evidence_refs":[]').replace(
    '"trace_digest":%s', '"trace_digest":null'
)
# Its literal pieces, around the seven fields a case fills in.
_LEAF_PARTS = _LEAF_INPUT.replace("%d", "%s").split("%s")
_MEASURES_MEMBER = ',"measures":'


def hashed(
    columns: CaseColumns,
    scorers: dict[str, ScorerInfo],
    scores: list[float | None],
    digests: list[str | None],
    assurances: list[str],
) -> tuple[list[bytes], list[str | None] | None] | None:
    """The cases' leaf hashes and measures texts, or None when a scorer digest or a case's
    measures need the careful path."""
    scorer_digests = {check_id: scorer.digest for check_id, scorer in scorers.items()}
    taken, measures = measure_texts(columns)
    if not plain("".join(scorer_digests.values())) or not taken:
        return None
    check_ids = columns["check_id"]
    scorer_column = list(map(scorer_digests.__getitem__, check_ids))
    leaves = case_leaves(
        columns["example_id"],
        columns["repeat"],
        columns["status"],
        scores,
        digests,
        assurances,
        scorer_column,
        measures,
    )
    return leaves, measures


def measure_texts(columns: CaseColumns) -> tuple[bool, list[str | None] | None]:
    """(whether the lane takes the measures, each case's measures as their canonical JSON or
    None when no case carries any). The batch's measures are checked together (their types,
    how many, their names once each, their values' range); a batch holding any a case may not
    carry goes the careful path, which names the fault."""
    if columns.measure_texts is not None:
        # The lines lane kept the canonical texts sent (app/ingestion/measure_lines.py).
        return True, columns.measure_texts
    if columns.absent_or_none("measures"):
        return True, None
    found = columns["measures"]
    present = [measures for measures in found if measures is not None]
    if not _measures_accepted(present):
        return False, None
    return True, _canonical_texts(found, present)


def _measures_accepted(present: list[Any]) -> bool:
    """Whether every case's measures are an object of at most MAX_MEASURES identifiers, each a
    finite number >= 0 below 2^53 (an integer past it is the strict parser's to refuse)."""
    if set(map(type, present)) != {dict} or max(map(len, present)) > MAX_MEASURES:
        return False
    if not all(IDENTIFIER_RE.fullmatch(name) for name in set().union(*present)):
        return False
    values = list(itertools.chain.from_iterable(map(dict.values, present)))
    if not values:
        return True
    if not set(map(type, values)) <= _NUMBER_TYPES:
        return False
    # JSON holds no NaN, so the extremes tell the range.
    return bool(min(values) >= 0 and max(values) <= MAX_SAFE_INTEGER)


def _canonical_texts(found: list[Any], present: list[Any]) -> list[str | None]:
    """Each case's measures as canonical JSON (None for none, or an empty object). orjson
    writes sorted keys and the shortest digits of a number, as RFC 8785 does, except that it
    writes an integral float as `1000.0` (made `1000` here) and its own exponent forms: a batch
    with an exponent is written number by number (measures_text). One call writes the batch's
    objects as an array (a call per object costs ten times more); the objects hold no nested
    object, so `},{` parts them."""
    # Shortest digits end in `.0` only for an integral float, and names hold no `,` or `}`.
    written = (
        orjson.dumps(present, option=orjson.OPT_SORT_KEYS)
        .replace(b".0,", b",")
        .replace(b".0}", b"}")
    )
    exponent = (b"e+" in written or b"e-" in written) and _EXPONENT.search(written) is not None
    if exponent:
        return list(map(measures_text, found))
    # A line between objects keeps each object's braces through the split.
    texts: list[Any] = written[1:-1].replace(b"},{", b"}\n{").decode().split("\n")
    if len(present) < len(found):
        laid = iter(texts)
        texts = [None if measures is None else next(laid) for measures in found]
    # An empty object is no measures: the careful path stores and hashes none.
    return [None if text == "{}" else text for text in texts] if "{}" in texts else texts


def case_leaves(
    example_ids: list[str],
    repeats: list[int],
    statuses: list[str],
    scores: list[float | None],
    digests: list[str | None],
    assurances: list[str],
    scorer_digests: list[str],
    measures: list[str | None] | None = None,
) -> list[bytes]:
    """The cases' leaf hashes (app/digest/merkle.py: leaf_hash of case_record)."""
    # Quotes around a whole column's texts go into the literal text beside it, so that no case
    # builds a quoted copy of its own.
    id_quote = digest_quote = ""
    ids: list[str]
    if measures is not None and None in measures:
        # The measures member follows the example id in the record: it joins the id's gap.
        ids = list(map(with_measures, json_strings(example_ids), measures))
        measures = None
    elif plain("".join(example_ids)):
        ids = example_ids
        id_quote = '"'
    else:
        ids = [orjson.dumps(e).decode() for e in example_ids]
    digest_texts: list[str]
    if None in digests:
        digest_texts = ["null" if d is None else '"' + d + '"' for d in digests]
    else:
        digest_texts = digests  # type: ignore[assignment]
        digest_quote = '"'
    if _all_none(scores):
        score_texts = ["null"] * len(scores)
    else:
        score_texts = ["null" if score is None else es_number(score) for score in scores]
    first, before_id, before_digest, *rest = _LEAF_PARTS
    parts = [first, before_id + id_quote]
    fields: list[list[Any]] = [assurances, ids]
    if measures is None:
        parts.append(id_quote + before_digest + digest_quote)
    else:
        # Every case has measures: a gap of their own, after the id's (where the member sorts).
        parts += [id_quote + _MEASURES_MEMBER, before_digest + digest_quote]
        fields.append(measures)
    parts += [digest_quote + rest[0], *rest[1:]]
    fields += [digest_texts, list(map(str, repeats)), score_texts, scorer_digests, statuses]
    return joined_leaf_hashes(parts, fields)


def _all_none(values: list[Any]) -> bool:
    return not values or (values[0] is None and values.count(None) == len(values))
