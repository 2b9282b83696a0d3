"""Validating a batch of cases column by column: the ingestion hot path's fast lane.

A batch whose cases all take the common shape (a known check and example, an integer repeat in
range, a known status, a number or null score, the pinned scorer version or none, an output
that fits in the row or none, no evidence refs, no trace, an assurance the caller may claim) is
checked with set and map operations over its columns, and its rows are built by `zip`. Any other
batch, and any batch holding a case that would be refused, goes to `CaseValidator.row` case by
case, which names the first fault: the lane only ever accepts, so it cannot answer differently
from the careful path, and tests hold the rows of both equal.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import TYPE_CHECKING, Any

import orjson

from app.canonical import canonical_bytes, digest_of_bytes, es_number
from app.merkle import LEAF_INPUT, plain
from app.repositories.cases import INLINE_OUTPUT_BYTES
from app.schemas.common import DIGEST_RE

if TYPE_CHECKING:
    from app.services.case_rows import CaseValidator, Row

_NONE = type(None)
_SHA256 = hashlib.sha256
_SCORE_TYPES = frozenset({_NONE, int, float})
_TEXT_OR_NONE = frozenset({_NONE, str})
# app/merkle.py's leaf input for a case without evidence refs or trace; the example id is
# written by orjson unless the whole batch's ids are plain.
_LEAF_INPUT = LEAF_INPUT.replace('"evidence_refs":%s', '"evidence_refs":[]').replace(
    '"trace_digest":%s', '"trace_digest":null'
)
_PLAIN_ID_LEAF_INPUT = _LEAF_INPUT.replace('"example_id":%s', '"example_id":"%s"')


def _column(cases: list[dict[str, Any]], name: str) -> list[Any]:
    return [case.get(name) for case in cases]


def _all_none(values: list[Any]) -> bool:
    return set(map(type, values)) == {_NONE}


def fast_rows(validator: CaseValidator, cases: list[Any]) -> tuple[list[Row], list[Row]] | None:
    """(rows, rows of outputs too long for the case row) of a batch in the common shape, or
    None when any case needs the careful path."""
    if not cases or set(map(type, cases)) != {dict}:
        return None
    if not all(map(validator.fields.issuperset, cases)):
        return None
    if not (_all_none(_column(cases, "evidence_refs")) and _all_none(_column(cases, "trace_ref"))):
        return None
    checks = validator.suite.checks
    check_ids = _column(cases, "check_id")
    example_ids = _column(cases, "example_id")
    repeats = _column(cases, "repeat")
    statuses = _column(cases, "status")
    if not (
        set(map(type, check_ids)) == {str}
        and set(map(type, example_ids)) == {str}
        and set(map(type, repeats)) == {int}
        and set(map(type, statuses)) == {str}
    ):
        return None
    distinct = set(check_ids)
    if not distinct <= checks.keys() or not set(statuses) <= validator.statuses:
        return None
    shared = {id(checks[check_id].example_positions) for check_id in distinct}
    if len(shared) == 1:
        # One dataset version (the suite cache shares its positions between checks).
        positions = list(map(checks[check_ids[0]].example_positions.get, example_ids))
    else:
        positions = [
            checks[check_id].example_positions.get(example_id)
            for check_id, example_id in zip(check_ids, example_ids, strict=True)
        ]
    if None in positions or min(repeats) < 0:
        return None
    if max(repeats) >= min(checks[check_id].repeats for check_id in distinct) and any(
        repeat >= checks[check_id].repeats
        for check_id, repeat in zip(check_ids, repeats, strict=True)
    ):
        return None
    scorers = {}
    for check_id in distinct:
        check = checks[check_id]
        scorer = validator.scorers.get((check.scorer_name, check.pinned_version))
        if scorer is None:
            return None
        scorers[check_id] = scorer

    versions = _column(cases, "scorer_version")
    if not _all_none(versions) and not all(
        version is None or version == checks[check_id].pinned_version
        for check_id, version in zip(check_ids, versions, strict=True)
    ):
        return None
    versions = [checks[check_id].pinned_version for check_id in check_ids]

    scores = _column(cases, "score")
    score_types = set(map(type, scores))
    if not score_types <= _SCORE_TYPES:
        return None
    if score_types != {_NONE}:
        scores = [None if score is None else float(score) for score in scores]
    if not _scores_accepted(validator, check_ids, statuses, scores, scorers):
        return None

    assurances = _column(cases, "assurance")
    if not set(map(type, assurances)) <= _TEXT_OR_NONE:
        return None
    claimed = set(assurances)
    claimed.discard(None)
    if not claimed <= validator.claimable:
        return None
    if None in assurances:
        assurances = [validator.assurance_cap if a is None else a for a in assurances]

    outputs = _output_columns(validator, cases)
    if outputs is None:
        return None
    texts, digests, long_texts = outputs

    scorer_digests = {check_id: scorer.digest for check_id, scorer in scorers.items()}
    if not plain("".join(scorer_digests.values())):
        return None
    leaves = _leaves(
        example_ids,
        repeats,
        statuses,
        scores,
        digests,
        assurances,
        [scorer_digests[check_id] for check_id in check_ids],
    )
    evaluation_id = validator.evaluation_id
    long_outputs = [
        (evaluation_id, check_ids[index], example_ids[index], repeats[index], text)
        for index, text in long_texts
    ]
    none = itertools.repeat(None)
    rows = list(
        zip(
            itertools.repeat(evaluation_id),
            check_ids,
            example_ids,
            positions,
            repeats,
            statuses,
            scores,
            texts,
            digests,
            none,
            none,
            none,
            none,
            versions,
            assurances,
            leaves,
        )
    )
    return rows, long_outputs


def _leaves(
    example_ids: list[str],
    repeats: list[int],
    statuses: list[str],
    scores: list[float | None],
    digests: list[str | None],
    assurances: list[str],
    scorer_digests: list[str],
) -> list[bytes]:
    """The cases' leaf hashes (app/merkle.py: leaf_hash of case_record)."""
    if plain("".join(example_ids)):
        template, ids = _PLAIN_ID_LEAF_INPUT, example_ids
    else:
        template, ids = _LEAF_INPUT, [orjson.dumps(e).decode() for e in example_ids]
    digest_texts = ["null" if d is None else '"' + d + '"' for d in digests]
    score_texts = ["null" if score is None else es_number(score) for score in scores]
    return [
        _SHA256(
            (template % (assurance, example_id, digest, repeat, score, scorer, status)).encode()
        ).digest()
        for example_id, repeat, status, score, digest, assurance, scorer in zip(
            ids,
            repeats,
            statuses,
            score_texts,
            digest_texts,
            assurances,
            scorer_digests,
            strict=True,
        )
    ]


def _scores_accepted(
    validator: CaseValidator,
    check_ids: list[str],
    statuses: list[str],
    scores: list[float | None],
    scorers: dict[str, Any],
) -> bool:
    """Whether every score lies in its scorer's range and every scored case of a check that
    aggregates scores has one (the checks `CaseValidator.row` makes)."""
    checks = validator.suite.checks
    needs = {check_id for check_id in scorers if checks[check_id].needs_score}
    ranged = {
        check_id: (scorer.score_lo, scorer.score_hi or 0.0)
        for check_id, scorer in scorers.items()
        if scorer.score_lo is not None
    }
    if not needs and not ranged:
        return True
    scored = validator.scored_statuses
    for check_id, status, score in zip(check_ids, statuses, scores, strict=True):
        if score is None:
            if check_id in needs and status in scored:
                return False
        elif check_id in ranged:
            low, high = ranged[check_id]
            if not low <= score <= high:
                return False
    return True


def _output_columns(
    validator: CaseValidator, cases: list[dict[str, Any]]
) -> tuple[list[str | None], list[str | None], list[tuple[int, str]]] | None:
    """(output texts kept in the case rows, output digests, (index, text) of the outputs too
    long for the row), or None when an output must be stored as an object or a sent digest is
    refused."""
    outputs = _column(cases, "output")
    sent = _column(cases, "output_digest")
    if not set(map(type, sent)) <= _TEXT_OR_NONE:
        return None
    limit = validator.inline_limit
    texts: list[str | None] = []
    digests: list[str | None] = []
    long_texts: list[tuple[int, str]] = []
    # Each output's bytes are dropped as soon as they are read: orjson hands back buffers that
    # glibc cannot reuse while they are kept, and keeping a batch of them cost ~2 µs each.
    for index, output in enumerate(outputs):
        if output is None:
            texts.append(None)
            digests.append(None)
            continue
        data = canonical_bytes(output)
        size = len(data)
        if size > limit:
            return None
        digests.append(digest_of_bytes(data))
        if size > INLINE_OUTPUT_BYTES:
            # The UTF-8 length decides, as for a single case.
            long_texts.append((index, data.decode()))
            texts.append(None)
        else:
            texts.append(data.decode())
    if not _all_none(sent):
        for index, (claimed, digest) in enumerate(zip(sent, digests, strict=True)):
            if claimed is None:
                continue
            if digest is None:
                if DIGEST_RE.fullmatch(claimed) is None:
                    return None
                digests[index] = claimed
            elif claimed != digest:
                return None
    return texts, digests, long_texts
