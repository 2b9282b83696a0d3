"""The leaf hashes of a batch the column lane takes (app/digest/merkle.py: leaf_hash of
case_record), each case's measures written into its record as the careful path writes them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from app.digest.canonical import es_number
from app.digest.merkle import LEAF_INPUT, joined_leaf_hashes, measures_text, plain, with_measures
from app.ingestion.rows import measures_problem

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
    None when no case carries any): some case's measures that are refused go the careful path,
    which names the fault."""
    if columns.absent_or_none("measures"):
        return True, None
    found = columns["measures"]
    if any(measures_problem(measures) is not None for measures in found):
        return False, None
    return True, list(map(measures_text, found))


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
    parts = list(_LEAF_PARTS)
    # Quotes around a whole column's texts go into the literal text beside it, so that no case
    # builds a quoted copy of its own.
    ids: list[str]
    if measures is not None:
        # The measures member follows the example id in the record: it joins the id's gap.
        ids = [
            with_measures(orjson.dumps(e).decode(), m)
            for e, m in zip(example_ids, measures, strict=True)
        ]
    elif plain("".join(example_ids)):
        ids = example_ids
        parts[1] += '"'
        parts[2] = '"' + parts[2]
    else:
        ids = [orjson.dumps(e).decode() for e in example_ids]
    digest_texts: list[str]
    if None in digests:
        digest_texts = ["null" if d is None else '"' + d + '"' for d in digests]
    else:
        digest_texts = digests  # type: ignore[assignment]
        parts[2] += '"'
        parts[3] = '"' + parts[3]
    if _all_none(scores):
        score_texts = ["null"] * len(scores)
    else:
        score_texts = ["null" if score is None else es_number(score) for score in scores]
    fields = [assurances, ids, digest_texts, list(map(str, repeats)), score_texts]
    return joined_leaf_hashes(parts, [*fields, scorer_digests, statuses])


def _all_none(values: list[Any]) -> bool:
    return not values or (values[0] is None and values.count(None) == len(values))
