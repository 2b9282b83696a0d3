"""Verifying a board bundle (docs/boards.md, "Proof"): the trailer, the board's digest, its
signed statement and its log entry, the suite version, each ranked report (digest, signed
statement, what the board repeats of it) and its cases root, then every pair, the correction
and the rank intervals recomputed from the cases (app/bundles/board_ranks.py). The Node
verifier (verify-bundle.mjs) checks the same things under the same failure codes."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import rfc8785

from app.bundles.board_format import BOARD_FORMAT
from app.bundles.board_proofs import Signers, settle_board_log, settle_statement
from app.bundles.board_ranks import ExampleValues, Subject, settle_ranks
from app.bundles.log_check import LogPolicy
from app.bundles.results import (
    Failure,
    Finding,
    NotABundle,
    NotProven,
    Proven,
    compared,
    failure,
    failure_documents,
)
from app.bundles.stream import GzipDamage, read_batches
from app.digest import merkle
from app.digest.canonical import digest_of, is_canonical
from app.digest.signing import BOARD_PREDICATE, REPORT_PREDICATE
from app.domain.vocabulary import PASS_FAIL_METHODS

CASE_PREFIX = b'{"kind":"case","record":'


@dataclass
class BoardOutcome:
    """What a board bundle's verification found."""

    lines: int = 0
    failures: list[Failure] = field(default_factory=list)
    proven: dict[str, int] = field(default_factory=dict)
    not_proven: dict[str, int] = field(default_factory=dict)
    board_id: str | None = None
    board_digest: str | None = None
    signer: dict[str, object] | None = None
    log: dict[str, object] | None = None

    @property
    def ok(self) -> bool:
        """True when everything provable was proven."""
        return not self.failures

    def record(self, findings: Iterator[Finding]) -> None:
        """Count what was proven and what cannot be, keep what failed."""
        for found in findings:
            if isinstance(found, Proven):
                self.proven[found.code] = self.proven.get(found.code, 0) + found.count
            elif isinstance(found, NotProven):
                self.not_proven[found.reason] = self.not_proven.get(found.reason, 0) + found.count
            else:
                self.failures.append(found)

    def document(self) -> dict[str, Any]:
        """The outcome as `--json` prints it (both verifiers print this shape)."""
        return {
            "ok": self.ok,
            "kind": "board",
            "lines": self.lines,
            "failures": failure_documents(self.failures),
            "proven": dict(sorted(self.proven.items())),
            "not_proven": dict(sorted(self.not_proven.items())),
            "board_id": self.board_id,
            "board_digest": self.board_digest,
            "signer": self.signer,
            "log": self.log,
        }


@dataclass
class _Read:
    """What the lines said, as they are read."""

    header: dict[str, Any] | None = None
    board: dict[str, Any] | None = None
    board_line: int = 0
    suite: dict[str, Any] | None = None
    reports: list[tuple[int, dict[str, Any], ExampleValues, list[bytes]]] = field(
        default_factory=list
    )
    trailer: tuple[int, dict[str, Any]] | None = None
    hash: Any = field(default_factory=hashlib.sha256)


def _check(body: dict[str, Any], check_id: str) -> dict[str, Any] | None:
    return next((c for c in body.get("checks") or [] if c.get("check_id") == check_id), None)


class BoardVerifier:
    """Reads a board bundle's lines, then settles what they prove."""

    def __init__(self, trusted: dict[str, bytes], require_trust: bool, policy: LogPolicy) -> None:
        self.trusted = trusted
        self.require_trust = require_trust or bool(trusted)
        self.policy = policy
        self.read = _Read()
        self.outcome = BoardOutcome()

    def _parsed(self, line_no: int, data: bytes) -> dict[str, Any] | None:
        """A line as a canonical JSON object before the trailer, else None (its failure kept)."""
        problem = None
        value = None
        if self.read.trailer is not None:
            problem = failure(line_no, "trailer", "a line after the trailer")
        else:
            try:
                value = orjson.loads(data)
            except orjson.JSONDecodeError:
                problem = failure(line_no, "line", "not JSON")
            else:
                if type(value) is not dict or not is_canonical(data):
                    problem = failure(line_no, "line", "not a canonical JSON object")
        if problem is not None:
            self.outcome.failures.append(problem)
            return None
        return value

    def _case(self, line_no: int, data: bytes, record: Any) -> None:
        """A case line: its values to the report read last, its leaf to that report's tree."""
        if type(record) is not dict:
            self.outcome.failures.append(failure(line_no, "line", "a case line holds a record"))
            return
        _, _, values, leaves = self.read.reports[-1]
        values.add(record)
        # A canonical line's record is its canonical bytes: hashed as they stand.
        if data.startswith(CASE_PREFIX):
            leaves.append(merkle.leaf_hash(data[len(CASE_PREFIX) : -1]))
        else:
            leaves.append(merkle.leaf_hash(rfc8785.dumps(record)))

    def feed(self, line_no: int, data: bytes) -> None:
        """One line."""
        read = self.read
        value = self._parsed(line_no, data)
        if value is None:
            return
        kind = value.get("kind")
        if kind == "trailer":
            read.trailer = (line_no, value)
            return
        read.hash.update(data + b"\n")
        if kind == "case" and read.reports:
            self._case(line_no, data, value.get("record"))
        elif kind == "report" and read.suite is not None:
            method, repeats = self._method()
            read.reports.append((line_no, value, ExampleValues(method, repeats), []))
        elif kind == "header" and line_no == 1:
            read.header = value
        elif kind == "board" and read.header is not None and read.board is None:
            read.board, read.board_line = value, line_no
        elif kind == "suite_version" and read.board is not None and read.suite is None:
            read.suite = value
        else:
            self.outcome.failures.append(failure(line_no, "line", f"a {kind!r} line out of order"))

    def _method(self) -> tuple[str, int]:
        """The board check's aggregation method and repeats, from the suite content."""
        assert self.read.suite is not None and self.read.board is not None
        content = self.read.suite.get("content") or {}
        check = _check(content, self.read.board.get("body", {}).get("check_id"))
        if check is None:
            return "pass_rate", 1
        return check["aggregation"]["method"], int(check["repeats"])

    def finish(self, lines: int) -> BoardOutcome:
        """Settle everything once every line is read."""
        outcome, read = self.outcome, self.read
        outcome.lines = lines
        if read.header is None or read.header.get("format") != BOARD_FORMAT:
            raise NotABundle("no board bundle header")
        outcome.record(self._trailer(lines))
        if read.board is None or read.suite is None:
            outcome.failures.append(
                failure(lines, "line", "the bundle has no board or no suite_version line")
            )
            return outcome
        body = read.board.get("body")
        if type(body) is not dict:
            outcome.failures.append(failure(read.board_line, "board", "the board line has a body"))
            return outcome
        outcome.board_id, outcome.board_digest = body.get("board_id"), read.board.get("digest")
        outcome.record(self._board(body))
        outcome.record(self._log(body))
        outcome.record(self._suite(body))
        subjects = []
        for found in self._reports(body):
            if isinstance(found, Subject):
                subjects.append(found)
            else:
                outcome.record(iter((found,)))
        expected = len(body["subjects"]) + len(body["excluded"])
        if len(subjects) == expected and len(read.reports) == expected:
            outcome.record(
                settle_ranks(read.board_line, body, subjects, body["methods"]["pairwise"])
            )
        return outcome

    def _trailer(self, lines: int) -> Iterator[Finding]:
        if self.read.trailer is None:
            yield failure(lines, "trailer", "the bundle has no trailer line")
            return
        line_no, trailer = self.read.trailer
        yield compared(
            line_no, "trailer", "the lines before the trailer", trailer.get("lines"), line_no - 1
        )
        yield compared(
            line_no,
            "trailer",
            "sha256 of the lines",
            trailer.get("sha256"),
            "sha256:" + self.read.hash.hexdigest(),
        )

    def _signers(self) -> Signers:
        return Signers(self._bundle_keys(), self.trusted, self.require_trust)

    def _bundle_keys(self) -> dict[str, bytes]:
        keys = {}
        for entry in (self.read.header or {}).get("keys") or []:
            try:
                keys[entry["keyid"]] = base64.b64decode(entry["public_key"], validate=True)
            except (KeyError, TypeError, ValueError):
                continue
        return keys

    def _board(self, body: dict[str, Any]) -> Iterator[Finding]:
        read, line_no = self.read, self.read.board_line
        assert read.board is not None and read.header is not None
        digest = digest_of(body)
        yield compared(
            line_no,
            "board_digest",
            "the board body's digest vs the line",
            read.board.get("digest"),
            digest,
        )
        yield compared(
            line_no,
            "board_digest",
            "the board body's digest vs the header",
            read.header.get("board_digest"),
            digest,
        )
        yield compared(
            line_no,
            "board",
            "the board's id vs the header",
            read.header.get("board_id"),
            body.get("board_id"),
        )
        expected = {
            "board": body,
            "board_digest": read.board.get("digest"),
            "board_id": body.get("board_id"),
        }
        envelope = read.board.get("attestation")
        if envelope is None:
            yield failure(line_no, "attestation", "the board carries no signed statement")
            return
        signer = yield from settle_statement(
            line_no, envelope, BOARD_PREDICATE, expected, self._signers()
        )
        if signer is not None:
            self.outcome.signer = {"keyid": signer[0], "trusted": signer[1]}

    def _log(self, body: dict[str, Any]) -> Iterator[Finding]:
        assert self.read.board is not None
        self.outcome.log = yield from settle_board_log(
            self.read.board_line, self.read.board, body, self.policy
        )

    def _suite(self, body: dict[str, Any]) -> Iterator[Finding]:
        suite = self.read.suite
        assert suite is not None
        digest = digest_of(suite.get("content"))
        line_no = self.read.board_line + 1
        yield compared(
            line_no,
            "suite_digest",
            "the suite content's digest vs the line",
            suite.get("digest"),
            digest,
        )
        yield compared(
            line_no,
            "suite_digest",
            "the suite content's digest vs the board's suite_ref",
            (body.get("suite_ref") or {}).get("digest"),
            digest,
        )
        method, repeats = self._method()
        test = "mcnemar_exact" if method in PASS_FAIL_METHODS and repeats == 1 else "paired_t"
        yield compared(
            line_no,
            "pairs",
            "the board's pairwise test for this check",
            test,
            (body.get("methods") or {}).get("pairwise"),
        )

    def _reports(self, body: dict[str, Any]) -> Generator[Finding | Subject, None, None]:
        entries = [*body.get("subjects", []), *body.get("excluded", [])]
        read = self.read
        named = [e.get("report_id") for e in entries]
        carried = [value.get("report_id") for _, value, _, _ in read.reports]
        if named != carried:
            yield failure(
                read.board_line,
                "report",
                "the bundle's reports vs the board's subjects, in order",
                named,
                carried,
            )
        by_id = {e.get("report_id"): e for e in entries}
        for line_no, value, values, leaves in read.reports:
            entry = by_id.get(value.get("report_id"))
            if entry is None:
                continue
            values.finish()
            found = yield from self._report(line_no, value, entry, body)
            if found is None:
                continue
            check = found
            committed = check.get("cases") or {}
            yield compared(
                line_no,
                "cases_root",
                "the report's cases count vs its case lines",
                committed.get("count"),
                len(leaves),
            )
            yield compared(
                line_no,
                "cases_root",
                "the tree rebuilt from the case lines vs the report's root",
                committed.get("root"),
                merkle.hex_digest(merkle.root(leaves)),
            )
            yield Subject(entry["subject"], value["report_id"], check.get("score"), values)

    def _report(
        self, line_no: int, value: dict[str, Any], entry: dict[str, Any], board: dict[str, Any]
    ) -> Generator[Finding, None, dict[str, Any] | None]:
        report_body = value.get("body")
        if type(report_body) is not dict:
            yield failure(line_no, "report", "the report line has a body")
            return None
        digest = digest_of(report_body)
        yield compared(
            line_no,
            "report_digest",
            "the report body's digest vs the line",
            value.get("digest"),
            digest,
        )
        yield compared(
            line_no,
            "report_digest",
            "the report body's digest vs the board",
            entry.get("report_digest"),
            digest,
        )
        check = _check(report_body, str(board.get("check_id")))
        subject = (report_body.get("subject") or {}).get("digest")
        same = (
            check is not None
            and subject == entry.get("subject")
            and report_body.get("suite_ref") == board.get("suite_ref")
            and report_body.get("report_id") == value.get("report_id")
            and (
                "score" not in entry
                or (check.get("score"), check.get("interval"))
                == (entry["score"], entry["interval"])
            )
        )
        if not same:
            yield failure(
                line_no,
                "report",
                "the report's subject, suite, check score and interval vs the board",
            )
            return None
        expected = {
            "body": report_body,
            "report_digest": digest,
            "report_id": value.get("report_id"),
        }
        yield from settle_statement(
            line_no, value.get("attestation"), REPORT_PREDICATE, expected, self._signers()
        )
        return check


def verify_board_file(
    path: Path, trusted: dict[str, bytes], require_trust: bool, policy: LogPolicy
) -> BoardOutcome:
    """Verify a board bundle file (NotABundle when it is none)."""
    verifier = BoardVerifier(trusted, require_trust, policy)
    line_no = 0
    try:
        with path.open("rb") as handle:
            for batch in read_batches(handle, None):
                for data in batch:
                    line_no += 1
                    verifier.feed(line_no, data)
    except GzipDamage as exc:
        damaged = BoardOutcome()
        damaged.failures.append(failure(0, exc.code, exc.what))
        return damaged
    return verifier.finish(line_no)
