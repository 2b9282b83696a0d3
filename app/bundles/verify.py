"""Verifying a v1 bundle offline: every digest it can prove, line by line (docs/bundles.md).

The verifier streams the file: it holds the report body, the suite content, per-dataset
example ids (for --replay and the explanation of absent bodies) and, with --replay, the
cases; never the whole file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import islice, takewhile
from operator import methodcaller
from pathlib import Path
from typing import Any, BinaryIO, TypedDict, Unpack

import orjson

from app.bundles import case_lane, example_lane
from app.bundles.admission import Reading, admit
from app.bundles.dataset_checks import close_dataset
from app.bundles.facts import Facts
from app.bundles.lexical import (
    BOM,
    line_problem,
    may_hold_long_number,
    number_problem,
    parsed_number_problem,
)
from app.bundles.line_checks import check_line
from app.bundles.log_check import LogPolicy
from app.bundles.results import (
    Failure,
    Finding,
    NotABundle,
    Outcome,
    failure,
    record_findings,
)
from app.bundles.settle import Settling, settle
from app.bundles.signature import Trust
from app.bundles.stream import GzipDamage, read_batches_ahead


class Verifier:
    """Feeds on lines in order; `finish` settles what can only be told at the end.

    It holds how to settle the bundle's end (`settling`: the keys trusted, the log's policy,
    whether to replay), where the reading stands (`reading`), what the lines have said
    (`facts`) and the outcome; every check is a function given the reading and facts it needs.
    """

    def __init__(
        self,
        replay: bool,
        trusted_keys: dict[str, bytes] | None = None,
        require_trust: bool = False,
        log_policy: LogPolicy | None = None,
    ) -> None:
        self.settling = Settling(
            Trust(trusted_keys or {}, require_trust), log_policy or LogPolicy(), replay
        )
        self.reading = Reading()
        self.facts = Facts(keep_cases=replay)
        self.outcome = Outcome()

    def record(self, findings: Iterable[Finding]) -> None:
        """Count what was proven, keep what failed (in order)."""
        record_findings(self.outcome, findings)

    def fail(
        self, line_no: int, code: str, what: str, expected: Any = None, actual: Any = None
    ) -> None:
        """Record a failure."""
        self.outcome.failures.append(failure(line_no, code, what, expected, actual))

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
            accepted = lane(self.reading, self.facts, first_line + index, lines[index:end])
            if accepted is None:
                for at in range(index, end):
                    self.feed(first_line + at, lines[at])
            else:
                self.record(accepted)
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
        facts = self.facts
        line = yield from admit(
            self.reading, line_no, raw, data, value, partial(close_dataset, facts)
        )
        if line is not None:
            yield from check_line(facts, self.reading, line_no, line)

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

    def finish(self, last_line: int) -> None:
        """Everything that needs the whole bundle."""
        settle(self.facts, self.reading, self.settling, self.outcome, last_line)


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
        options.get("log_policy"),
    )
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
        # Everything read before the damage counts for nothing, its lines included: how many
        # were read first depends on the reader's block size (the Node verifier says 0 too).
        damaged = Outcome(lines=0)
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
