"""Verifying a v1 bundle offline: every digest it can prove, line by line (docs/bundles.md).

The verifier streams the file: it holds the report body, the suite content, per-dataset
example ids (for --replay and the explanation of absent bodies) and, with --replay, the
cases; never the whole file.
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from collections.abc import Callable
from itertools import islice, takewhile
from operator import methodcaller
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from app.bundles import case_lane, example_lane
from app.bundles.fields import (
    ALLOWED,
    case_problem,
    item_problem,
    key_problem,
    shape_problem,
)
from app.bundles.format import FORMAT
from app.bundles.lexical import (
    BOM,
    line_problem,
    may_hold_long_number,
    number_problem,
    parsed_number_problem,
)
from app.bundles.log_check import LogPolicy
from app.bundles.rebuild import DatasetDigest, EvidenceDigest
from app.bundles.results import PHASES, REQUIRED, Failure, NotABundle, Outcome
from app.bundles.settle import settle
from app.bundles.stream import GzipDamage, read_batches_ahead
from app.bundles.trees import leaf_of
from app.canonical import DIGEST_PREFIX, canonical_bytes, digest_of, digest_of_bytes


class Verifier:
    """Feeds on lines in order; `finish` settles what can only be told at the end."""

    def __init__(
        self,
        replay: bool,
        trusted_keys: dict[str, bytes] | None = None,
        require_trust: bool = False,
    ) -> None:
        self.outcome = Outcome()
        # Why the file is no bundle (its first line): told once the gzip stream is read whole.
        self.not_a_bundle: str | None = None
        self.replay = replay
        self.trusted_keys = trusted_keys or {}
        self.require_trust = require_trust
        self.bundle_keys: dict[str, bytes] = {}
        self.seen: set[str] = set()
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
        self.stream_hash = hashlib.sha256()
        self.phase = -1
        self.header: dict[str, Any] = {}
        self.body: dict[str, Any] = {}
        self.suite: dict[str, Any] = {}
        self.trailer_seen = False
        self.pinned: dict[tuple[str, str], str] = {}
        self.scorer_lines: dict[tuple[str, str], dict[str, Any]] = {}
        self.dataset: DatasetDigest | None = None
        self.datasets: dict[str, DatasetDigest] = {}
        self.absent_bodies: list[tuple[int, str, str]] = []
        self.check: dict[str, Any] | None = None
        self.check_lines: dict[str, dict[str, Any]] = {}
        self.evidence: dict[str, tuple[int, EvidenceDigest]] = {}
        self.last_case: tuple[str, bytes, int] | None = None
        self.cases: dict[str, dict[str, list[dict[str, Any]]]] = {"case": {}, "baseline_case": {}}
        self.items: dict[str, list[dict[str, Any]]] = {"unavailable": [], "redacted": []}
        self.may_hold_bodies = True
        # The current line's bytes when they are canonical JSON, else None.
        self.line: bytes | None = None

    # -- helpers ------------------------------------------------------------------------

    def fail(
        self, line_no: int, code: str, what: str, expected: Any = None, actual: Any = None
    ) -> None:
        """Record a failure."""
        self.outcome.failures.append(
            Failure(
                line_no,
                code,
                what,
                None if expected is None else str(expected),
                None if actual is None else str(actual),
            )
        )

    def equal(self, line_no: int, code: str, what: str, expected: Any, actual: Any) -> bool:
        """Record a failure unless equal; True when equal."""
        if expected == actual:
            self.outcome.proven[code] += 1
            return True
        self.fail(line_no, code, what, expected, actual)
        return False

    def member_digest(self, key: bytes, follower: bytes, value: Any) -> str:
        """The digest of a member's value: cut from the line when the line is canonical (keys
        in order, the member followed by `follower`; a quote inside a string is escaped, so
        the key's first and the follower's last occurrence are the line's own), else
        canonicalized again."""
        line = self.line
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
        if self.not_a_bundle is not None:
            return
        if self.trailer_seen:
            self.fail(line_no, "after_trailer", "a line after the trailer")
            return
        raw = data
        problem = line_problem(data)
        while problem is not None and data.startswith(BOM):
            self.fail(line_no, *problem)
            data = data[len(BOM) :]
            problem = line_problem(data)
        if problem is not None:
            if line_no == 1:
                self.not_a_bundle = f"line 1: {problem[1]}"
                return
            self.fail(line_no, *problem)
            self.stream_hash.update(raw + b"\n")
            return
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            out_of_range = number_problem(data)
            if line_no == 1:
                self.not_a_bundle = f"line 1: {out_of_range or f'not JSON: {exc}'}"
                return
            if out_of_range is not None:
                self.fail(line_no, "limits", out_of_range)
            else:
                self.fail(line_no, "not_json", f"not JSON: {exc}")
            self.stream_hash.update(raw + b"\n")
            return
        if may_hold_long_number(data):
            out_of_range = parsed_number_problem(data, value)
            if out_of_range is not None:
                if line_no == 1:
                    self.not_a_bundle = f"line 1: {out_of_range}"
                    return
                self.fail(line_no, "limits", out_of_range)
                self.stream_hash.update(raw + b"\n")
                return
        kind = value.get("kind") if type(value) is dict else None
        if line_no == 1 and (kind != "header" or value.get("format") != FORMAT):
            self.not_a_bundle = f"line 1 is not a {FORMAT} header"
            return
        if kind != "trailer":
            self.stream_hash.update(raw + b"\n")
        if type(kind) is not str or kind not in PHASES:
            self.fail(line_no, "unknown_kind", f"unknown line kind {kind!r}")
            return
        self.line = data if canonical_bytes(value) == data else None
        if self.line is None:
            self.fail(line_no, "not_canonical", f"the {kind} line is not canonical JSON")
        unknown = sorted(set(value) - ALLOWED[kind])
        if unknown:
            self.fail(line_no, "unknown_field", f"the {kind} line has unknown fields {unknown}")
        if kind in ("header", "report", "suite_version"):
            if kind in self.seen:
                self.fail(line_no, "duplicate", f"a second {kind} line")
                return
            self.seen.add(kind)
        phase = PHASES[kind]
        if phase < self.phase:
            self.fail(line_no, "order", f"a {kind} line out of the bundle's order")
        elif phase > self.phase and self.phase in (4, 5):
            self.close_dataset()
        self.phase = max(self.phase, phase)
        missing = [name for name in REQUIRED[kind] if name not in value]
        if missing:
            self.fail(line_no, "malformed", f"the {kind} line lacks {', '.join(missing)}")
            if kind == "trailer":
                self.trailer_seen = True
            return
        mistyped = shape_problem(kind, value)
        if mistyped is not None:
            self.fail(line_no, "malformed", mistyped)
            return
        try:
            getattr(self, "_" + kind)(line_no, value)
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            self.fail(line_no, "malformed", f"the {kind} line lacks or mistypes a field ({exc!r})")

    def _header(self, line_no: int, value: dict[str, Any]) -> None:
        self.header = value
        permissions = set(value.get("exporter", {}).get("permissions", []))
        self.may_hold_bodies = bool(permissions & {"dataset.read_body", "admin"})
        entries = value.get("keys", [])
        if type(entries) is not list:
            self.fail(line_no, "keys", "the header's keys is a list")
            return
        for entry in entries:
            problem = key_problem(entry)
            if problem is not None:
                self.fail(line_no, "keys", problem)
                continue
            self.bundle_keys[entry["keyid"]] = base64.b64decode(entry["public_key"])

    def _report(self, line_no: int, value: dict[str, Any]) -> None:
        self.body = body = value["body"]
        self.report_line = line_no
        self.attestation = value.get("attestation")
        self.supersessions = value.get("supersessions")
        self.log = value.get("log")
        self.envelope = value.get("envelope")
        computed = self.body_digest = digest_of(body)
        self.equal(
            line_no, "report_digest", "the body's digest vs the line", value["digest"], computed
        )
        self.equal(
            line_no,
            "report_digest",
            "the body's digest vs the header",
            self.header.get("report_digest"),
            computed,
        )
        self.equal(
            line_no,
            "report_id",
            "the body's report_id vs the header",
            self.header.get("report_id"),
            body.get("report_id"),
        )
        envelope = value.get("envelope") or {}
        self.equal(
            line_no,
            "envelope",
            "envelope.expires_at vs the body's valid_until",
            body.get("valid_until"),
            envelope.get("expires_at"),
        )
        url = str(envelope.get("url", ""))
        self.equal(
            line_no,
            "envelope",
            "envelope.url names the report",
            f".../reports/{body.get('report_id')}",
            ".../reports/" + url.rsplit("/reports/", 1)[-1],
        )
        status = envelope.get("status")
        if status == "current":
            superseded = [
                envelope.get(k) for k in ("superseded_by", "superseded_at", "superseded_reason")
            ]
            self.equal(
                line_no,
                "envelope",
                "a current report's supersession fields",
                [None] * 3,
                superseded,
            )
        elif status == "superseded":
            self.equal(
                line_no,
                "envelope",
                "superseded_reason is a known reason",
                True,
                envelope.get("superseded_reason") in ("re_evaluation", "suite_version_activated"),
            )
        else:
            self.fail(line_no, "envelope", "envelope.status", "current or superseded", status)

    def _suite_version(self, line_no: int, value: dict[str, Any]) -> None:
        self.suite = content = value["content"]
        computed = digest_of(content)
        self.equal(
            line_no,
            "suite_digest",
            "the suite content's digest vs the line",
            value["digest"],
            computed,
        )
        self.equal(
            line_no,
            "suite_digest",
            "the suite content's digest vs the body's suite_ref",
            self.body.get("suite_ref", {}).get("digest"),
            computed,
        )
        for check in content.get("checks", []):
            scorer = check["scorer"]
            self.pinned[(scorer["name"], scorer["version"])] = scorer["digest"]

    def _scorer_version(self, line_no: int, value: dict[str, Any]) -> None:
        key = (value["name"], value["version"])
        if key in self.scorer_lines:
            self.fail(line_no, "duplicate", f"a second line for scorer {key[0]} {key[1]}")
            return
        self.scorer_lines[key] = value
        computed = digest_of(
            {"name": value["name"], "version": value["version"], "definition": value["definition"]}
        )
        self.equal(
            line_no,
            "scorer_digest",
            f"scorer {key[0]} {key[1]} vs the line",
            value["digest"],
            computed,
        )
        self.equal(
            line_no,
            "scorer_digest",
            f"scorer {key[0]} {key[1]} vs the suite's pin",
            self.pinned.get(key),
            computed,
        )

    def _dataset_version(self, line_no: int, value: dict[str, Any]) -> None:
        self.close_dataset()
        if value["digest"] in self.datasets:
            self.fail(line_no, "duplicate", f"a second line for dataset {value['digest']}")
            return
        self.dataset = DatasetDigest(line_no, value)
        self.datasets[value["digest"]] = self.dataset

    def _example(self, line_no: int, value: dict[str, Any]) -> None:
        dataset = self.dataset
        if dataset is None or value["dataset"] != dataset.fields["digest"]:
            self.fail(line_no, "order", "an example outside its dataset version")
            return
        example_id = value["id"]
        key = example_id.encode()
        if dataset.last_id is not None and key <= dataset.last_id:
            self.fail(line_no, "order", f"example {example_id!r} is not in id order")
        dataset.last_id = key
        dataset.add(example_id, value["body_digest"], value["tags"])
        if "body" in value:
            if not self.may_hold_bodies:
                self.fail(
                    line_no,
                    "body_without_permission",
                    "an example body for an exporter without dataset.read_body",
                )
            self.equal(
                line_no,
                "body_digest",
                f"example {example_id!r} body",
                value["body_digest"],
                self.member_digest(b'"body":', b',"body_digest":', value["body"]),
            )
        else:
            self.absent_bodies.append((line_no, value["dataset"], example_id))

    def close_dataset(self) -> None:
        dataset, self.dataset = self.dataset, None
        if dataset is None:
            return
        fields, line_no = dataset.fields, dataset.line_no
        self.equal(
            line_no,
            "dataset_count",
            f"dataset {fields['name']} {fields['version']} example count",
            fields["example_count"],
            dataset.count,
        )
        computed = dataset.digest()
        self.equal(
            line_no,
            "dataset_digest",
            f"dataset {fields['name']} {fields['version']} from its example lines",
            fields["digest"],
            computed,
        )
        refs = {r["digest"]: r for r in self.body.get("dataset_refs", [])}
        ref = refs.get(computed)
        self.equal(
            line_no,
            "dataset_digest",
            f"dataset {fields['name']} {fields['version']} vs the body's dataset_refs",
            True,
            ref is not None
            and (ref["name"], ref["version"]) == (fields["name"], fields["version"]),
        )

    def _check(self, line_no: int, value: dict[str, Any]) -> None:
        check_id = value["check_id"]
        if check_id in self.check_lines:
            self.fail(line_no, "duplicate", f"a second check line for {check_id!r}")
            return
        self.check = value
        self.last_case = None
        self.check_lines[check_id] = value
        self.check_line_numbers[check_id] = line_no
        body_checks = {c["check_id"]: c for c in self.body.get("checks", [])}
        expected = body_checks.get(check_id)
        if expected is None:
            self.fail(line_no, "check_result", f"check {check_id!r} is not in the report body")
            return
        self.equal(
            line_no,
            "check_result",
            f"check {check_id!r} vs the report body",
            canonical_bytes(expected).decode(),
            canonical_bytes(value["result"]).decode(),
        )
        if expected.get("evidence_manifest"):
            manifest = value.get("manifest")
            if manifest is None:
                self.fail(
                    line_no, "manifest", f"check {check_id!r} has evidence_manifest but no manifest"
                )
            else:
                self.equal(
                    line_no,
                    "manifest",
                    f"check {check_id!r} manifest vs its evidence_refs",
                    (expected["evidence_refs"] or [None])[0],
                    digest_of(manifest),
                )
        self.evidence[check_id] = (line_no, EvidenceDigest())

    def _case(self, line_no: int, value: dict[str, Any]) -> None:
        self._any_case(line_no, value, "case")

    def _baseline_case(self, line_no: int, value: dict[str, Any]) -> None:
        self._any_case(line_no, value, "baseline_case")

    def _any_case(self, line_no: int, value: dict[str, Any], kind: str) -> None:
        check = self.check
        check_id = value["check_id"]
        if check is None or check_id != check["check_id"]:
            self.fail(line_no, "order", f"a {kind} of {check_id!r} outside its check")
            return
        problem = case_problem(value)
        if problem is not None:
            self.fail(line_no, "malformed", f"a {kind} line: {problem}")
            return
        example_id, repeat = value["example_id"], int(value["repeat"])
        position = (kind, example_id.encode(), repeat)
        last = self.last_case
        if last is not None and last[0] == "baseline_case" and kind == "case":
            self.fail(line_no, "order", "a case after the baseline's cases")
        elif last is not None and last[0] == kind and position[1:] <= last[1:]:
            code = "duplicate" if position[1:] == last[1:] else "order"
            self.fail(line_no, code, f"{kind} {example_id!r}/{repeat} is not in case order")
            return
        self.last_case = position
        self.leaves.setdefault((kind, check_id), []).append(leaf_of(value))
        if "trace_ref" in value:
            self.traced_counts[(kind, check_id)] += 1
        if "output" not in value and value["output_digest"] is not None:
            self.absent_outputs[(kind, check_id, example_id, repeat)] = (
                line_no,
                value["output_digest"],
            )
        if kind == "case":
            self.evidence[check_id][1].add(value)
        if "output" in value:
            if not self.may_hold_bodies:
                self.fail(
                    line_no,
                    "body_without_permission",
                    "a case output for an exporter without dataset.read_body",
                )
            self.equal(
                line_no,
                "output_digest",
                f"{kind} {check_id}/{value['example_id']}/{value['repeat']} output",
                value.get("output_digest"),
                self.member_digest(b'"output":', b',"output_digest":', value["output"]),
            )
        if self.replay:
            self.cases[kind].setdefault(check_id, []).append(
                {k: v for k, v in value.items() if k != "output"}
            )

    def _unavailable(self, line_no: int, value: dict[str, Any]) -> None:
        self._items(line_no, value, "unavailable")

    def _redacted(self, line_no: int, value: dict[str, Any]) -> None:
        self._items(line_no, value, "redacted")

    def _items(self, line_no: int, value: dict[str, Any], kind: str) -> None:
        items = value["items"]
        if type(items) is not list:
            self.fail(line_no, "item", f"the {kind} line's items is a list")
            return
        for item in items:
            problem = item_problem(kind, item)
            if problem is not None:
                self.fail(line_no, "item", problem)
                continue
            self.items[kind].append({**item, "line": line_no})
            self.outcome.not_proven[f"{kind}: {item['what']} ({item['reason']})"] += item.get(
                "count", 1
            )

    def _trailer(self, line_no: int, value: dict[str, Any]) -> None:
        self.trailer_seen = True
        self.equal(
            line_no, "trailer_lines", "lines before the trailer", value.get("lines"), line_no - 1
        )
        self.equal(
            line_no,
            "trailer_sha256",
            "sha256 of the lines before the trailer",
            value.get("sha256"),
            DIGEST_PREFIX + self.stream_hash.hexdigest(),
        )

    def finish(self, last_line: int) -> None:
        """Everything that needs the whole bundle."""
        settle(self, last_line)


def verify_stream(
    handle: BinaryIO,
    *,
    replay: bool = False,
    progress: Callable[[int], None] | None = None,
    trusted_keys: dict[str, bytes] | None = None,
    require_trust: bool = False,
    careful: bool = False,
    log_policy: LogPolicy | None = None,
) -> Outcome:
    """Verify a bundle read from a binary file object (`careful`: every line on its own, the
    reference the fast lane is tested against)."""
    verifier = Verifier(replay, trusted_keys, require_trust)
    verifier.log_policy = log_policy or LogPolicy()
    line_no = 0
    try:
        for batch in read_batches_ahead(handle, progress):
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
    if verifier.not_a_bundle is not None:
        raise NotABundle(verifier.not_a_bundle)
    if line_no == 0:
        raise NotABundle("no lines")
    verifier.finish(line_no)
    return verifier.outcome


def verify_file(
    path: Path,
    *,
    replay: bool = False,
    progress: Callable[[int], None] | None = None,
    trusted_keys: dict[str, bytes] | None = None,
    require_trust: bool = False,
    careful: bool = False,
    log_policy: LogPolicy | None = None,
) -> Outcome:
    """Verify a bundle file."""
    with open(path, "rb") as handle:
        return verify_stream(
            handle,
            replay=replay,
            progress=progress,
            trusted_keys=trusted_keys,
            require_trust=require_trust,
            careful=careful,
            log_policy=log_policy,
        )
