"""Verifying a v1 bundle offline: every digest it can prove, line by line (docs/bundles.md).

The verifier streams the file: it holds the report body, the suite content, per-dataset
example ids (for --replay and the explanation of absent bodies) and, with --replay, the
cases; never the whole file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import islice, takewhile
from operator import methodcaller
from pathlib import Path
from typing import Any, BinaryIO, TypedDict, Unpack

import orjson

from app.bundles import case_lane, example_lane
from app.bundles.admission import Reading, admit
from app.bundles.lexical import (
    BOM,
    line_problem,
    may_hold_long_number,
    number_problem,
    parsed_number_problem,
)
from app.bundles.line_checks import check_line
from app.bundles.lines import CheckLine, HeaderLine, ScorerVersionLine
from app.bundles.log_check import LogPolicy
from app.bundles.rebuild import DatasetDigest, EvidenceDigest
from app.bundles.results import (
    Failure,
    Finding,
    NotABundle,
    NotProven,
    Outcome,
    Proven,
    compared,
    failure,
)
from app.bundles.settle import settle
from app.bundles.stream import GzipDamage, read_batches_ahead
from app.canonical import digest_of, digest_of_bytes


class Verifier:
    """Feeds on lines in order; `finish` settles what can only be told at the end."""

    def __init__(
        self,
        replay: bool,
        trusted_keys: dict[str, bytes] | None = None,
        require_trust: bool = False,
    ) -> None:
        self.outcome = Outcome()
        self.reading = Reading()
        self.replay = replay
        self.trusted_keys = trusted_keys or {}
        self.require_trust = require_trust
        self.bundle_keys: dict[str, bytes] = {}
        self.report_line = 0
        self.attestation: Any = None
        self.supersessions: Any = None
        self.log: Any = None
        self.log_policy = LogPolicy()
        self.envelope: Any = None
        self.body_digest = ""
        self.check_line_numbers: dict[str, int] = {}
        self.leaves: dict[tuple[str, str], list[bytes]] = {}
        self.traced_counts: Counter[tuple[str, str]] = Counter()
        # (kind, check, example, repeat) -> (line, output_digest) of a case without its output
        self.absent_outputs: dict[tuple[str, str, str, int], tuple[int, str]] = {}
        self.header: HeaderLine | None = None
        self.body: dict[str, Any] = {}
        self.suite: dict[str, Any] = {}
        self.pinned: dict[tuple[str, str], str] = {}
        self.scorer_lines: dict[tuple[str, str], ScorerVersionLine] = {}
        self.dataset: DatasetDigest | None = None
        self.datasets: dict[str, DatasetDigest] = {}
        self.absent_bodies: list[tuple[int, str, str]] = []
        self.check: CheckLine | None = None
        self.check_lines: dict[str, CheckLine] = {}
        self.evidence: dict[str, tuple[int, EvidenceDigest]] = {}
        self.last_case: tuple[str, bytes, int] | None = None
        self.cases: dict[str, dict[str, list[dict[str, Any]]]] = {"case": {}, "baseline_case": {}}
        self.items: dict[str, list[dict[str, Any]]] = {"unavailable": [], "redacted": []}
        self.may_hold_bodies = True

    # -- helpers ------------------------------------------------------------------------

    def record(self, findings: Iterable[Finding]) -> None:
        """Count what was proven, keep what failed (in order)."""
        outcome = self.outcome
        for found in findings:
            if isinstance(found, Proven):
                outcome.proven[found.code] += 1
            elif isinstance(found, NotProven):
                outcome.not_proven[found.reason] += found.count
            else:
                outcome.failures.append(found)

    def fail(
        self, line_no: int, code: str, what: str, expected: Any = None, actual: Any = None
    ) -> None:
        """Record a failure."""
        self.outcome.failures.append(failure(line_no, code, what, expected, actual))

    def member_digest(self, key: bytes, follower: bytes, value: Any) -> str:
        """The digest of a member's value: cut from the line when the line is canonical (keys
        in order, the member followed by `follower`; a quote inside a string is escaped, so
        the key's first and the follower's last occurrence are the line's own), else
        canonicalized again."""
        line = self.reading.line
        if line is not None:
            start, end = line.find(key), line.rfind(follower)
            if 0 <= start < end:
                return digest_of_bytes(line[start + len(key) : end])
        return digest_of(value)

    # -- lines --------------------------------------------------------------------------

    def feed_lines(self, first_line: int, lines: list[bytes]) -> None:
        """Check consecutive lines numbered from `first_line`: runs of case and of example lines
        through their fast lanes (app/bundles/case_lane.py, example_lane.py), which hand back
        any run they cannot accept."""
        count = len(lines)
        index = 0
        while index < count:
            line = lines[index]
            if line.startswith(case_lane.CASE_START):
                start, lane = case_lane.CASE_START, case_lane.accept
            elif line.startswith(example_lane.EXAMPLE_START):
                start, lane = example_lane.EXAMPLE_START, example_lane.accept
            else:
                self.feed(first_line + index, line)
                index += 1
                continue
            # The run's end, found without a Python loop over its lines.
            run = takewhile(methodcaller("startswith", start), islice(lines, index + 1, None))
            end = index + 1 + len(list(run))
            if not lane(self, first_line + index, lines[index:end]):
                for at in range(index, end):
                    self.feed(first_line + at, lines[at])
            index = end

    def feed(self, line_no: int, data: bytes) -> None:
        """Check one line."""
        reading = self.reading
        if reading.not_a_bundle is not None:
            return
        if reading.trailer_seen:
            self.fail(line_no, "after_trailer", "a line after the trailer")
            return
        decoded = self._decode(line_no, data)
        if decoded is None:
            return
        value, text = decoded
        self.record(self._checked(line_no, data, text, value))

    def _checked(self, line_no: int, raw: bytes, data: bytes, value: Any) -> Iterator[Finding]:
        """Admit a parsed line, then run its kind's checks."""
        line = yield from admit(self.reading, line_no, raw, data, value, self.close_dataset)
        if line is not None:
            yield from check_line(self, line_no, line)

    def _decode(self, line_no: int, raw: bytes) -> tuple[Any, bytes] | None:
        """The line's JSON value and its text without a leading BOM, or None when a lexical
        fault was recorded (the stream hash takes the line) or line 1 shows no bundle."""
        data = raw
        problem = line_problem(data)
        while problem is not None and data.startswith(BOM):
            self.fail(line_no, *problem)
            data = data[len(BOM) :]
            problem = line_problem(data)
        if problem is None:
            try:
                value = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                problem = ("limits", number_problem(data) or "")
                if not problem[1]:
                    problem = ("not_json", f"not JSON: {exc}")
            else:
                out_of_range = (
                    parsed_number_problem(data, value) if may_hold_long_number(data) else None
                )
                if out_of_range is None:
                    return value, data
                problem = ("limits", out_of_range)
        if line_no == 1:
            self.reading.not_a_bundle = f"line 1: {problem[1]}"
            return None
        self.fail(line_no, *problem)
        self.reading.hash_line(raw)
        return None

    def close_dataset(self) -> Iterator[Finding]:
        """Settle the dataset version whose example lines just ended."""
        dataset, self.dataset = self.dataset, None
        if dataset is not None:
            yield from _dataset_findings(dataset, self.body)

    def finish(self, last_line: int) -> None:
        """Everything that needs the whole bundle."""
        settle(self, last_line)


def _dataset_findings(dataset: DatasetDigest, body: dict[str, Any]) -> Iterator[Finding]:
    """A dataset version's example count and digest from its example lines, and its digest
    among the body's dataset_refs."""
    line, line_no = dataset.line, dataset.line_no
    yield compared(
        line_no,
        "dataset_count",
        f"dataset {line.name} {line.version} example count",
        line.example_count,
        dataset.count,
    )
    computed = dataset.digest()
    yield compared(
        line_no,
        "dataset_digest",
        f"dataset {line.name} {line.version} from its example lines",
        line.digest,
        computed,
    )
    ref = {r["digest"]: r for r in body.get("dataset_refs", [])}.get(computed)
    yield compared(
        line_no,
        "dataset_digest",
        f"dataset {line.name} {line.version} vs the body's dataset_refs",
        True,
        ref is not None and (ref["name"], ref["version"]) == (line.name, line.version),
    )


class VerifyOptions(TypedDict, total=False):
    """How to verify: `replay` the aggregation; the keys trusted, and whether trust is
    required; `careful` (every line on its own, the reference the fast lanes are tested
    against); the log's keys and witnesses; a progress callback (bytes read)."""

    replay: bool
    progress: Callable[[int], None] | None
    trusted_keys: dict[str, bytes] | None
    require_trust: bool
    careful: bool
    log_policy: LogPolicy | None


def verify_stream(handle: BinaryIO, **options: Unpack[VerifyOptions]) -> Outcome:
    """Verify a bundle read from a binary file object."""
    verifier = Verifier(
        options.get("replay", False),
        options.get("trusted_keys"),
        options.get("require_trust", False),
    )
    verifier.log_policy = options.get("log_policy") or LogPolicy()
    careful = options.get("careful", False)
    line_no = 0
    try:
        for batch in read_batches_ahead(handle, options.get("progress")):
            if careful:
                for offset, data in enumerate(batch, start=1):
                    verifier.feed(line_no + offset, data)
            else:
                verifier.feed_lines(line_no + 1, batch)
            line_no += len(batch)
    except GzipDamage as exc:
        damaged = Outcome(lines=line_no)
        damaged.failures.append(Failure(0, exc.code, exc.what))
        return damaged
    if verifier.reading.not_a_bundle is not None:
        raise NotABundle(verifier.reading.not_a_bundle)
    if line_no == 0:
        raise NotABundle("no lines")
    verifier.finish(line_no)
    return verifier.outcome


def verify_file(path: Path, **options: Unpack[VerifyOptions]) -> Outcome:
    """Verify a bundle file."""
    with open(path, "rb") as handle:
        return verify_stream(handle, **options)
