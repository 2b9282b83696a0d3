"""Validating a batch of cases column by column: the lane for parsed values.

A batch whose cases all take the common shape (a known check and example, an integer repeat in
range, a known status, a number or null score, the pinned scorer version or none, an output
that fits in the row or none, no evidence refs, no trace, an assurance the caller may claim) is
checked with set and map operations over its columns, and its rows are built by `zip`. Any other
batch, and any batch holding a case that would be refused, goes to the careful path
(`CaseValidator.careful_rows`), which names the first fault: the lane only ever accepts, so it
cannot answer differently from the careful path, and tests hold the rows of both equal.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable
from operator import itemgetter
from typing import TYPE_CHECKING, Any, cast

import orjson

from app.digest.canonical import DIGEST_PREFIX as _DIGEST_PREFIX
from app.digest.canonical import canonical_bytes
from app.digest.sha256 import short_digest, short_digests
from app.domain.identifiers import DIGEST_RE
from app.ingestion import leaves
from app.ingestion.rows import (
    INLINE_OUTPUT_BYTES,
    CaseRow,
    LongOutput,
    ValidatedBatch,
)

if TYPE_CHECKING:
    from app.ingestion.validator import CaseValidator, ScorerInfo

_NONE = type(None)
_SCORE_TYPES = frozenset({_NONE, int, float})
_TEXT_OR_NONE = frozenset({_NONE, str})


# A number token with a fraction or an exponent in orjson's output: one follows `[`, `:` or `,`
# (orjson writes no white space). Inside a string the same bytes only send a batch the long way.
_FLOAT_TOKEN = re.compile(rb"[\[:,]-?[0-9]+[.e]")
_SORTED = orjson.OPT_SORT_KEYS


class _Columns:
    """A batch's fields column by column: transposed at once when every case has the same
    keys (the common case), else read case by case."""

    # Outputs come as values, to be written canonically here, and no field's type is known;
    # measures come as objects.
    written = None
    typed = False
    measure_texts = None

    def __init__(self, cases: list[dict[str, Any]]) -> None:
        self.cases = cases
        self.keys: frozenset[str] = frozenset()
        self._by_name: dict[str, list[Any]] | None = None
        keys = tuple(cases[0])
        if len(keys) > 1 and set(map(len, cases)) == {len(keys)}:
            try:
                rows = list(map(itemgetter(*keys), cases))
            except KeyError:
                return
            # Each case has as many keys as the first and all of the first's: the same keys.
            self.keys = frozenset(keys)
            self._by_name = dict(zip(keys, map(list, zip(*rows, strict=True)), strict=True))

    def uniform(self) -> bool:
        """Whether every case has the same keys."""
        return self._by_name is not None

    def __getitem__(self, name: str) -> list[Any]:
        if self._by_name is None:
            return [case.get(name) for case in self.cases]
        found = self._by_name.get(name)
        return [None] * len(self.cases) if found is None else found

    def absent_or_none(self, name: str) -> bool:
        """Whether no case has a value for `name`."""
        if self._by_name is not None and name not in self._by_name:
            return True
        return _all_none(self[name])


class PreparedColumns:
    """A batch's columns as a decoder gave them: every known field, None where a case has no
    value, the outputs as their canonical bytes (None for no output), and each case's measures
    text when the lane kept the canonical bytes sent (`measure_texts`; else the measures column
    holds objects)."""

    # The decoder has typed every field: ids and statuses strings, repeats integers, scores
    # floats or None, assurances and sent digests strings or None.
    typed = True

    def __init__(
        self, by_name: dict[str, list[Any]], measure_texts: list[str | None] | None = None
    ) -> None:
        self._by_name = by_name
        self.measure_texts = measure_texts
        # The output column holds the canonical bytes themselves.
        self.written: list[bytes | None] | None = by_name["output"]

    def __getitem__(self, name: str) -> list[Any]:
        return self._by_name[name]

    def absent_or_none(self, name: str) -> bool:
        """Whether no case has a value for `name`."""
        return _all_none(self._by_name[name])


CaseColumns = _Columns | PreparedColumns


def _all_none(values: list[Any]) -> bool:
    # A column that has a value mostly has one in its first case; one of Nones is counted by
    # identity.
    return not values or (values[0] is None and values.count(None) == len(values))


def value_rows(validator: CaseValidator, cases: list[Any]) -> ValidatedBatch | None:
    """A batch of parsed cases validated, when every case takes the common shape; None when
    any case needs the careful path."""
    if not cases or set(map(type, cases)) != {dict}:
        return None
    columns = _Columns(cases)
    if columns.uniform():
        if not validator.fields.issuperset(columns.keys):
            return None
    elif not all(map(validator.fields.issuperset, cases)):
        return None
    return column_rows(validator, columns)


def column_rows(validator: CaseValidator, columns: CaseColumns) -> ValidatedBatch | None:
    """value_rows of a batch given column by column (only known fields, None where a case has
    no value), or None when any case needs the careful path."""
    if not (columns.absent_or_none("evidence_refs") and columns.absent_or_none("trace_ref")):
        return None
    check_ids = columns["check_id"]
    example_ids = columns["example_id"]
    repeats = columns["repeat"]
    statuses = columns["status"]
    if not _keys_typed(columns):
        return None
    distinct = set(check_ids)
    if not distinct <= validator.suite.checks.keys() or not set(statuses) <= validator.statuses:
        return None
    positions = _positions(validator, check_ids, example_ids, repeats, distinct)
    scorers = _scorers(validator, distinct)
    versions = _pinned_versions(validator, columns, distinct)
    if positions is None or scorers is None or versions is None:
        return None
    scores = _scores(validator, columns, scorers)
    assurances = _assurances(validator, columns)
    outputs = _output_columns(validator, columns)
    if scores is None or assurances is None or outputs is None:
        return None
    texts, digests, long_texts = outputs
    hashed = leaves.hashed(columns, scorers, scores, digests, assurances)
    if hashed is None:
        return None
    case_leaves, measures = hashed
    evaluation_id = validator.evaluation_id
    long_outputs: list[LongOutput] = [
        (evaluation_id, check_ids[index], example_ids[index], repeats[index], text)
        for index, text in long_texts
    ]
    none = itertools.repeat(None)
    rows = _zipped(
        itertools.repeat(evaluation_id),
        check_ids,
        example_ids,
        positions,
        repeats,
        statuses,
        scores,
        texts,
        digests,
        *([none] * 4),
        versions,
        assurances,
        case_leaves,
        none if measures is None else measures,
    )
    # The lane takes no batch with an output stored as an object: nothing to upload.
    return ValidatedBatch(rows, long_outputs, {})


def _zipped(*columns: Iterable[Any]) -> list[CaseRow]:
    """Rows from their seventeen columns, in CASE_COLUMNS order."""
    # zip types the tuples of seventeen columns loosely; each is a CaseRow by construction.
    return cast("list[CaseRow]", list(zip(*columns)))  # noqa: B905 (the repeats are endless)


def _keys_typed(columns: CaseColumns) -> bool:
    """Whether the key columns hold the JSON types the fast path takes."""
    return columns.typed or (
        set(map(type, columns["check_id"])) == {str}
        and set(map(type, columns["example_id"])) == {str}
        and set(map(type, columns["repeat"])) == {int}
        and set(map(type, columns["status"])) == {str}
    )


def _positions(
    validator: CaseValidator,
    check_ids: list[str],
    example_ids: list[str],
    repeats: list[int],
    distinct: set[str],
) -> list[int] | None:
    """Each case's example position, or None when an example or a repeat is out of its check."""
    checks = validator.suite.checks
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
    return cast(list[int], positions)


def _scorers(validator: CaseValidator, distinct: set[str]) -> dict[str, ScorerInfo] | None:
    """Each check's pinned scorer, or None when one is not known."""
    checks = validator.suite.checks
    scorers = {}
    for check_id in distinct:
        check = checks[check_id]
        scorer = validator.scorers.get((check.scorer_name, check.pinned_version))
        if scorer is None:
            return None
        scorers[check_id] = scorer
    return scorers


def _pinned_versions(
    validator: CaseValidator, columns: CaseColumns, distinct: set[str]
) -> list[str] | None:
    """Each case's scorer version (the check's pin), or None when a case names another."""
    checks = validator.suite.checks
    check_ids = columns["check_id"]
    versions = columns["scorer_version"]
    if not columns.absent_or_none("scorer_version") and not all(
        version is None or version == checks[check_id].pinned_version
        for check_id, version in zip(check_ids, versions, strict=True)
    ):
        return None
    pinned = {check_id: checks[check_id].pinned_version for check_id in distinct}
    return list(map(pinned.__getitem__, check_ids))


def _scores(
    validator: CaseValidator, columns: CaseColumns, scorers: dict[str, ScorerInfo]
) -> list[float | None] | None:
    """The score column as floats, or None when a score is mistyped or refused."""
    scores = columns["score"]
    if not columns.typed:
        score_types = set(map(type, scores))
        if not score_types <= _SCORE_TYPES:
            return None
        if score_types != {_NONE}:
            scores = [None if score is None else float(score) for score in scores]
    if not _scores_accepted(validator, columns["check_id"], columns["status"], scores, scorers):
        return None
    return scores


def _assurances(validator: CaseValidator, columns: CaseColumns) -> list[str] | None:
    """Each case's assurance (the cap where none is claimed), or None when one is refused."""
    assurances = columns["assurance"]
    if not columns.typed and not set(map(type, assurances)) <= _TEXT_OR_NONE:
        return None
    claimed = set(assurances)
    claimed.discard(None)
    if not claimed <= validator.claimable:
        return None
    if None in assurances:
        assurances = [validator.assurance_cap if a is None else a for a in assurances]
    return assurances


def _full_outputs(
    outputs: list[Any], canonical: Any, limit: int
) -> tuple[list[str | None], list[str | None], list[tuple[int, str]]] | None:
    """_output_columns for a column where every case has an output: one pass each for the
    bytes, their digests and texts."""
    written: list[bytes] = (
        cast("list[bytes]", outputs) if canonical is _same_bytes else list(map(canonical, outputs))
    )
    sizes = list(map(len, written))
    longest = max(sizes)
    if longest > limit:
        return None
    digests: list[str | None] = list(
        map(_DIGEST_PREFIX.__add__, map(bytes.hex, short_digests(written)))
    )
    texts: list[str | None] = list(map(bytes.decode, written))
    long_texts: list[tuple[int, str]] = []
    if longest > INLINE_OUTPUT_BYTES:
        # The UTF-8 length decides, as for a single case.
        for index, size in enumerate(sizes):
            if size > INLINE_OUTPUT_BYTES:
                long_texts.append((index, written[index].decode()))
                texts[index] = None
    return texts, digests, long_texts


def _sent_digests_agree(sent: list[Any], digests: list[str | None]) -> bool:
    """Each digest a case sent matches its output's (taken as given where it sent no output,
    when it is a digest); `digests` filled in from what was sent."""
    for index, (claimed, digest) in enumerate(zip(sent, digests, strict=True)):
        if claimed is None:
            continue
        if digest is None:
            if DIGEST_RE.fullmatch(claimed) is None:
                return False
            digests[index] = claimed
        elif claimed != digest:
            return False
    return True


def _mixed_outputs(
    outputs: list[Any], canonical: Any, limit: int
) -> tuple[list[str | None], list[str | None], list[tuple[int, str]]] | None:
    """_output_columns for a column where some cases have no output."""
    texts: list[str | None] = []
    digests: list[str | None] = []
    long_texts: list[tuple[int, str]] = []
    for index, output in enumerate(outputs):
        if output is None:
            texts.append(None)
            digests.append(None)
            continue
        data = canonical(output)
        size = len(data)
        if size > limit:
            return None
        digests.append(_DIGEST_PREFIX + short_digest(data).hex())
        if size > INLINE_OUTPUT_BYTES:
            long_texts.append((index, data.decode()))
            texts.append(None)
        else:
            texts.append(data.decode())
    return texts, digests, long_texts


def _same_bytes(data: bytes) -> bytes:
    """Bytes that are canonical already, as they are."""
    return data


# orjson with sorted keys, as a C-level callable (no Python frame per output).
_plain_sorted = functools.partial(orjson.dumps, option=_SORTED)


def _canonical_writer(outputs: list[Any]) -> Any:
    """What writes each of these outputs' canonical bytes: orjson with sorted keys alone when
    the whole column, written once, is ASCII (keys sort the same in UTF-8 and UTF-16) and holds
    no float (the one value orjson and RFC 8785 may write apart), else `canonical_bytes`."""
    try:
        column = orjson.dumps(outputs, option=_SORTED)
    except orjson.JSONEncodeError:
        return canonical_bytes
    if column.isascii() and _FLOAT_TOKEN.search(column) is None:
        return _plain_sorted
    return canonical_bytes


def _scores_accepted(
    validator: CaseValidator,
    check_ids: list[str],
    statuses: list[str],
    scores: list[float | None],
    scorers: dict[str, ScorerInfo],
) -> bool:
    """Whether every score lies in its scorer's range and every scored case of a check that
    aggregates scores has one (the checks the careful path makes)."""
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
    validator: CaseValidator, columns: CaseColumns
) -> tuple[list[str | None], list[str | None], list[tuple[int, str]]] | None:
    """(output texts kept in the case rows, output digests, (index, text) of the outputs too
    long for the row), or None when an output must be stored as an object or a sent digest is
    refused."""
    sent = columns["output_digest"]
    if not columns.typed and not set(map(type, sent)) <= _TEXT_OR_NONE:
        return None
    outputs: list[Any]
    if columns.written is None:
        outputs = columns["output"]
        canonical = _canonical_writer(outputs)
    else:
        # Already the canonical bytes.
        outputs, canonical = columns.written, _same_bytes
    limit = validator.inline_limit
    texts: list[str | None]
    digests: list[str | None]
    long_texts: list[tuple[int, str]] = []
    if None in outputs:
        found = _mixed_outputs(outputs, canonical, limit)
        if found is None:
            return None
        texts, digests, long_texts = found
    else:
        found = _full_outputs(outputs, canonical, limit)
        if found is None:
            return None
        texts, digests, long_texts = found
    if not _all_none(sent) and not _sent_digests_agree(sent, digests):
        return None
    return texts, digests, long_texts
