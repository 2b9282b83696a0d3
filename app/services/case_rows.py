"""Validating one case and turning it into a staging row (the ingestion hot path).

Plain Python rather than Pydantic: this runs once per case, a million times per large
evaluation. The rules mirror `schemas.evaluations.CaseIn` and docs/verdicts.md, section 1.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.auth import ASSURANCE_RANK
from app.canonical import canonical_bytes, digest_of_bytes
from app.errors import Forbidden, ProblemError, validation_error
from app.merkle import case_record, leaf_hash
from app.repositories.cases import INLINE_OUTPUT_BYTES, driver_uuid
from app.schemas.common import DIGEST_RE, IDENTIFIER_RE
from app.services.case_batch import fast_rows
from app.services.case_lines import line_rows
from app.services.compiled import CompiledSuite
from app.storage import ObjectStore
from app.strictjson import parse_lines

CASE_FIELDS = frozenset(
    {
        "check_id",
        "example_id",
        "repeat",
        "status",
        "score",
        "output",
        "output_digest",
        "evidence_refs",
        "trace_ref",
        "scorer_version",
        "assurance",
    }
)
STATUSES = frozenset(
    {"pass", "fail", "error", "timeout", "cancelled", "skipped", "unsupported", "abstained"}
)
SCORED_STATUSES = frozenset({"pass", "fail"})
MAX_EVIDENCE_REFS = 1000

Row = tuple[Any, ...]


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


class CaseValidator:
    """Checks cases against a compiled suite and builds their staging rows."""

    # What the batch lane (app/services/case_batch.py) checks against, named here once.
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
        store: ObjectStore,
        object_prefix: str,
        inline_limit: int,
        ndjson: bool,
    ) -> None:
        # Written into every row this validator builds.
        self.evaluation_id = driver_uuid(evaluation_id)
        self.suite = suite
        self.scorers = scorers
        self.assurance_cap = assurance_cap
        self.cap_rank = ASSURANCE_RANK[assurance_cap]
        self.claimable = frozenset(
            level for level, rank in ASSURANCE_RANK.items() if rank <= self.cap_rank
        )
        self.store = store
        self.object_prefix = object_prefix
        self.inline_limit = inline_limit
        self.ndjson = ndjson
        self.pending_uploads: dict[str, bytes] = {}
        # (evaluation, check, example, repeat, output) of the rows built with an inline output
        # longer than INLINE_OUTPUT_BYTES, taken by the caller with each batch.
        self.outputs: list[Row] = []
        # Whether NDJSON lines still try the lane that reads their bytes (app/services/
        # case_lines.py): a request whose lines miss it once parses the rest as values.
        self.lines_lane = True

    def _error(self, index: int, field: str | None, msg: str) -> ProblemError:
        base: tuple[str | int, ...] = (
            (f"line {index}",) if self.ndjson else ("body", "cases", index)
        )
        loc = base if field is None else (*base, field)
        return validation_error(loc, msg, index=index)

    def line_batch_rows(self, numbers: Sequence[int], lines: list[bytes]) -> list[Row]:
        """Validate a batch of NDJSON lines (with their numbers): from their bytes when every
        line takes the common shape, else parsed strictly (a 422 names the first faulty line)
        and validated as values."""
        if self.lines_lane:
            built = line_rows(self, lines)
            if built is not None:
                rows, long_outputs = built
                self.outputs.extend(long_outputs)
                return rows
            self.lines_lane = False
        return self.rows(numbers, parse_lines(numbers, lines))

    def rows(self, indexes: Sequence[int], cases: list[Any]) -> list[Row]:
        """Validate a batch of cases (with their indexes): through the column-wise lane when
        every case takes the common shape, else case by case (which names the first fault)."""
        built = fast_rows(self, cases)
        if built is None:
            return list(map(self.row, indexes, cases))
        rows, long_outputs = built
        self.outputs.extend(long_outputs)
        return rows

    def row(self, index: int, case: Any) -> Row:
        """Validate one case; return its `cases` row (its inline output goes to `outputs`) or
        raise a located problem."""
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
        output_text, output_digest, output_key = self._output(index, case)
        evidence = self._evidence(index, case)
        trace_id, trace_digest = self._trace(index, case.get("trace_ref"))
        assurance = self._assurance(index, case)
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
            )
        )
        if output_text is not None and _longer_than_inline(output_text):
            self.outputs.append((self.evaluation_id, check_id, example_id, repeat, output_text))
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
        )

    def _place(self, index: int, case: dict[str, Any]) -> tuple[str, Any, str, int]:
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

    def _repeat(self, index: int, case: dict[str, Any], check: Any) -> int:
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

    def _scorer(self, index: int, case: dict[str, Any], check: Any) -> tuple[str, Any]:
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
        self, index: int, case: dict[str, Any], check: Any, scorer: Any, status: str
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
        self, index: int, case: dict[str, Any]
    ) -> tuple[str | None, str | None, str | None]:
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
        self.pending_uploads[key] = data
        return None, digest, key

    async def upload_pending(self) -> None:
        """Store the large outputs of validated rows before those rows are written."""
        for key, data in self.pending_uploads.items():
            await self.store.put(key, data, "application/json")
        self.pending_uploads.clear()

    def _trace(self, index: int, trace: Any) -> tuple[str | None, str | None]:
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
