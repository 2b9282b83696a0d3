"""The careful path of ingestion: one case at a time, which decides every batch the lanes do not
take whole and names the first fault (docs/verdicts.md, section 1).

Plain Python rather than Pydantic: the rules mirror `schemas.evaluations.CaseIn`, and where a
batch is refused this runs once per case up to the fault.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.digest.canonical import canonical_bytes, digest_of_bytes
from app.digest.merkle import case_record, leaf_hash, measures_text
from app.domain.errors import Forbidden, ProblemError, validation_error
from app.domain.identifiers import DIGEST_RE, IDENTIFIER_RE
from app.domain.suites import CompiledCheck, CompiledSuite
from app.domain.vocabulary import ASSURANCE_RANK
from app.ingestion.rows import (
    CASE_FIELDS,
    INLINE_OUTPUT_BYTES,
    MAX_EVIDENCE_REFS,
    SCORED_STATUSES,
    STATUSES,
    CaseRow,
    LongOutput,
    ValidatedBatch,
    measures_problem,
)


def _longer_than_inline(text: str) -> bool:
    """Whether an output's UTF-8 passes INLINE_OUTPUT_BYTES (it then leaves the case's row)."""
    if len(text) > INLINE_OUTPUT_BYTES:
        return True
    return not text.isascii() and len(text.encode()) > INLINE_OUTPUT_BYTES


@dataclass(frozen=True)
class ScorerInfo:
    """A scorer version as a case may name it."""

    digest: str
    score_lo: float | None
    score_hi: float | None


@dataclass
class _Collected:
    """What the careful path has built of a batch so far."""

    rows: list[CaseRow] = field(default_factory=list)
    long_outputs: list[LongOutput] = field(default_factory=list)
    uploads: dict[str, bytes] = field(default_factory=dict)


class CaseValidator:
    """Checks cases against a compiled suite and builds their staging rows."""

    # What the column lane (app/ingestion/columns.py) checks against, named here once.
    fields = CASE_FIELDS
    statuses = STATUSES
    scored_statuses = SCORED_STATUSES

    def __init__(
        self,
        *,
        evaluation_id: uuid.UUID,
        suite: CompiledSuite,
        scorers: dict[tuple[str, str], ScorerInfo],
        assurance_cap: str,
        object_prefix: str,
        inline_limit: int,
        ndjson: bool,
    ) -> None:
        # Written into every row this validator builds (the caller may pass the database
        # driver's own UUID, which COPY writes fastest).
        self.evaluation_id = evaluation_id
        self.suite = suite
        self.scorers = scorers
        self.assurance_cap = assurance_cap
        self.cap_rank = ASSURANCE_RANK[assurance_cap]
        self.claimable = frozenset(
            level for level, rank in ASSURANCE_RANK.items() if rank <= self.cap_rank
        )
        self.object_prefix = object_prefix
        self.inline_limit = inline_limit
        self.ndjson = ndjson
        # Whether NDJSON lines still try the lane that reads their bytes (app/ingestion/
        # lines.py): a request whose lines miss it once parses the rest as values.
        self.lines_lane = True

    def _error(self, index: int, field: str | None, msg: str) -> ProblemError:
        base: tuple[str | int, ...] = (
            (f"line {index}",) if self.ndjson else ("body", "cases", index)
        )
        loc = base if field is None else (*base, field)
        return validation_error(loc, msg, index=index)

    def careful_rows(self, indexes: Sequence[int], cases: Sequence[Any]) -> ValidatedBatch:
        """Validate a batch case by case; raise a located problem at the first fault."""
        collected = _Collected()
        for index, case in zip(indexes, cases, strict=True):
            collected.rows.append(self.row(index, case, collected))
        return ValidatedBatch(collected.rows, collected.long_outputs, collected.uploads)

    def row(self, index: int, case: Any, collected: _Collected) -> CaseRow:
        """Validate one case; return its `cases` row (a long output and an object to store go
        to `collected`) or raise a located problem."""
        if type(case) is not dict:
            raise self._error(index, None, "a case is a JSON object")
        if not case.keys() <= CASE_FIELDS:
            unknown = sorted(case.keys() - CASE_FIELDS)[0]
            raise self._error(index, unknown, "unknown field")
        check_id, check, example_id, example_position = self._place(index, case)
        repeat = self._repeat(index, case, check)
        status = case.get("status")
        if type(status) is not str or status not in STATUSES:
            raise self._error(index, "status", f"status must be one of {sorted(STATUSES)}")
        version, scorer = self._scorer(index, case, check)
        score = self._score(index, case, check, scorer, status)
        output_text, output_digest, output_key = self._output(index, case, collected.uploads)
        evidence = self._evidence(index, case)
        trace_id, trace_digest = self._trace(index, case.get("trace_ref"))
        assurance = self._assurance(index, case)
        measures = self._measures(index, case.get("measures"))
        leaf = leaf_hash(
            case_record(
                example_id,
                repeat,
                status,
                score,
                output_digest,
                trace_digest,
                evidence,
                assurance,
                scorer.digest,
                measures,
            )
        )
        if output_text is not None and _longer_than_inline(output_text):
            collected.long_outputs.append(
                (self.evaluation_id, check_id, example_id, repeat, output_text)
            )
            output_text = None
        return (
            self.evaluation_id,
            check_id,
            example_id,
            example_position,
            repeat,
            status,
            score,
            output_text,
            output_digest,
            output_key,
            evidence,
            trace_id,
            trace_digest,
            version,
            assurance,
            leaf,
            measures,
        )

    def _place(self, index: int, case: dict[str, Any]) -> tuple[str, CompiledCheck, str, int]:
        """The case's check id, check, example id and example position."""
        check_id = case.get("check_id")
        if type(check_id) is not str:
            raise self._error(index, "check_id", "required, a string")
        check = self.suite.checks.get(check_id)
        if check is None:
            raise self._error(index, "check_id", f"unknown check {check_id!r}")
        example_id = case.get("example_id")
        if type(example_id) is not str:
            raise self._error(index, "example_id", "required, a string")
        example_position = check.example_positions.get(example_id)
        if example_position is None:
            raise self._error(index, "example_id", f"unknown example {example_id!r} for {check_id}")
        return check_id, check, example_id, example_position

    def _repeat(self, index: int, case: dict[str, Any], check: CompiledCheck) -> int:
        """The case's repeat, within the check's repeats."""
        repeat = case.get("repeat")
        if type(repeat) is float and repeat.is_integer():
            # JSON has one number type: 2.0 is the integer 2 (as JSON Schema says too).
            repeat = int(repeat)
        if type(repeat) is not int:
            raise self._error(index, "repeat", "required, an integer")
        if not 0 <= repeat < check.repeats:
            raise self._error(index, "repeat", f"repeat must lie in 0..{check.repeats - 1}")
        return repeat

    def _scorer(
        self, index: int, case: dict[str, Any], check: CompiledCheck
    ) -> tuple[str, ScorerInfo]:
        """The case's scorer version (the check's pin when it names none) and that scorer."""
        version = case.get("scorer_version")
        if version is None:
            version = check.pinned_version
        elif type(version) is not str or IDENTIFIER_RE.fullmatch(version) is None:
            raise self._error(index, "scorer_version", "an identifier")
        scorer = self.scorers.get((check.scorer_name, version))
        if scorer is None:
            raise self._error(index, "scorer_version", f"unknown scorer version {version!r}")
        return version, scorer

    def _score(
        self,
        index: int,
        case: dict[str, Any],
        check: CompiledCheck,
        scorer: ScorerInfo,
        status: str,
    ) -> float | None:
        """The case's score as a float, inside the scorer's range; required where scored."""
        score = case.get("score")
        if score is None:
            if check.needs_score and status in SCORED_STATUSES:
                raise self._error(
                    index, "score", f"a scored case of a {check.method} check needs a score"
                )
            return None
        if type(score) is not float and type(score) is not int:
            raise self._error(index, "score", "a finite number")
        score = float(score)
        if scorer.score_lo is not None and not (
            scorer.score_lo <= score <= (scorer.score_hi or 0.0)
        ):
            raise self._error(
                index,
                "score",
                f"outside the scorer's score_range [{scorer.score_lo}, {scorer.score_hi}]",
            )
        return score

    def _evidence(self, index: int, case: dict[str, Any]) -> list[str] | None:
        """The case's evidence digests, if any."""
        evidence = case.get("evidence_refs")
        if evidence is None:
            return None
        if type(evidence) is not list or len(evidence) > MAX_EVIDENCE_REFS:
            raise self._error(
                index, "evidence_refs", f"a list of at most {MAX_EVIDENCE_REFS} digests"
            )
        for ref in evidence:
            if type(ref) is not str or DIGEST_RE.fullmatch(ref) is None:
                raise self._error(index, "evidence_refs", 'each item is "sha256:<64 hex>"')
        return evidence

    def _assurance(self, index: int, case: dict[str, Any]) -> str:
        """The case's assurance: the cap when it claims none; never above the cap."""
        assurance = case.get("assurance")
        if assurance is None:
            return self.assurance_cap
        rank = ASSURANCE_RANK.get(assurance) if type(assurance) is str else None
        if rank is None:
            raise self._error(index, "assurance", f"one of {list(ASSURANCE_RANK)}")
        if rank > self.cap_rank:
            where = f"line {index}" if self.ndjson else f"case {index}"
            raise Forbidden(
                f"{where} claims assurance {assurance!r}; this token and evaluation "
                f"may attest at most {self.assurance_cap!r}",
                index=index,
            )
        claimed: str = assurance
        return claimed

    def _output(
        self, index: int, case: dict[str, Any], uploads: dict[str, bytes]
    ) -> tuple[str | None, str | None, str | None]:
        """The case's inline output, its digest and its object key (the bytes go to
        `uploads`)."""
        sent_digest = case.get("output_digest")
        if sent_digest is not None and (
            type(sent_digest) is not str or DIGEST_RE.fullmatch(sent_digest) is None
        ):
            raise self._error(index, "output_digest", '"sha256:<64 hex>"')
        output = case.get("output")
        if output is None:
            return None, sent_digest, None
        data = canonical_bytes(output)
        digest = digest_of_bytes(data)
        if sent_digest is not None and sent_digest != digest:
            raise self._error(
                index, "output_digest", f"does not match the output (computed {digest})"
            )
        if len(data) <= self.inline_limit:
            return data.decode(), digest, None
        key = f"{self.object_prefix}/{digest.removeprefix('sha256:')}.json"
        uploads[key] = data
        return None, digest, key

    def _measures(self, index: int, measures: Any) -> str | None:
        """The case's measures as their canonical JSON (None when it carries none)."""
        problem = measures_problem(measures)
        if problem is not None:
            name, message = problem
            raise self._error(index, "measures" if name is None else f"measures.{name}", message)
        return measures_text(measures)

    def _trace(self, index: int, trace: Any) -> tuple[str | None, str | None]:
        """The case's trace id and digest, if it names a trace."""
        if trace is None:
            return None, None
        if (
            type(trace) is not dict
            or trace.keys() != {"id", "digest"}
            or type(trace["id"]) is not str
            or not 0 < len(trace["id"]) <= 200
            or type(trace["digest"]) is not str
            or DIGEST_RE.fullmatch(trace["digest"]) is None
        ):
            raise self._error(index, "trace_ref", '{"id": string, "digest": "sha256:<64 hex>"}')
        return trace["id"], trace["digest"]
