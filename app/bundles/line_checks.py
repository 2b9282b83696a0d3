"""What each kind of bundle line proves, one function per kind, each taking its kind's typed
line (admission, app/bundles/admission.py, comes first: known fields, required fields and
their types, the bundle's order)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from msgspec import UNSET

from app.bundles.admission import Reading
from app.bundles.dataset_checks import carried_body, on_dataset_version, on_example
from app.bundles.facts import Facts
from app.bundles.fields import item_problem, key_problem
from app.bundles.label_checks import on_label
from app.bundles.lines import (
    BundleLine,
    CaseLine,
    CheckLine,
    DatasetVersionLine,
    ExampleLine,
    HeaderLine,
    LabelLine,
    MalformedCase,
    RedactedLine,
    ReportLine,
    ScorerVersionLine,
    SuiteVersionLine,
    TrailerLine,
    UnavailableLine,
    case_fields,
)
from app.bundles.rebuild import EvidenceDigest
from app.bundles.results import Failure, Finding, NotProven, compared, failure
from app.bundles.trees import leaf_of
from app.digest.canonical import DIGEST_PREFIX, canonical_bytes, digest_of


def check_line(
    facts: Facts, reading: Reading, line_no: int, line: BundleLine | MalformedCase
) -> Iterator[Finding]:
    """What an admitted line proves, by its kind."""
    match line:
        case HeaderLine():
            return on_header(facts, line_no, line)
        case ReportLine():
            return on_report(facts, line_no, line)
        case SuiteVersionLine():
            return on_suite_version(facts, line_no, line)
        case ScorerVersionLine():
            return on_scorer_version(facts, line_no, line)
        case DatasetVersionLine():
            return on_dataset_version(facts, line_no, line)
        case ExampleLine():
            return on_example(facts, reading, line_no, line)
        case CheckLine():
            return on_check(facts, line_no, line)
        case CaseLine() | MalformedCase():
            return on_case(facts, reading, line_no, line)
        case LabelLine():
            return on_label(facts, line_no, line)
        case UnavailableLine() | RedactedLine():
            return on_items(facts, line_no, line)
        case TrailerLine():
            return on_trailer(facts, reading, line_no, line)


def on_header(facts: Facts, line_no: int, line: HeaderLine) -> Iterator[Finding]:
    """The header: the exporter's permissions and the bundle's keys."""
    facts.header = line
    permissions = set(line.exporter.get("permissions", []))
    facts.may_hold_bodies = bool(permissions & {"dataset.read_body", "admin"})
    entries = [] if line.keys is UNSET else line.keys
    if type(entries) is not list:
        yield failure(line_no, "keys", "the header's keys is a list")
        return
    for entry in entries:
        problem = key_problem(entry)
        if problem is not None:
            yield failure(line_no, "keys", problem)
            continue
        facts.bundle_keys[entry["keyid"]] = base64.b64decode(entry["public_key"])


def on_report(facts: Facts, line_no: int, line: ReportLine) -> Iterator[Finding]:
    """The report line: its body's digest and ids against the line and the header."""
    facts.body = body = line.body
    facts.report_line = line_no
    facts.attestation = line.attestation
    facts.supersessions = line.supersessions
    facts.log = line.log
    facts.test_result = line.test_result
    facts.envelope = line.envelope
    computed = facts.body_digest = digest_of(body)
    header = facts.header
    yield compared(line_no, "report_digest", "the body's digest vs the line", line.digest, computed)
    yield compared(
        line_no,
        "report_digest",
        "the body's digest vs the header",
        None if header is None else header.report_digest,
        computed,
    )
    yield compared(
        line_no,
        "report_id",
        "the body's report_id vs the header",
        None if header is None else header.report_id,
        body.get("report_id"),
    )
    yield from _envelope(line_no, body, line.envelope)


def _envelope(line_no: int, body: dict[str, Any], envelope: dict[str, Any]) -> Iterator[Finding]:
    """The envelope against the body: expiry, URL, and a status with its supersession fields."""
    yield compared(
        line_no,
        "envelope",
        "envelope.expires_at vs the body's valid_until",
        body.get("valid_until"),
        envelope.get("expires_at"),
    )
    url = str(envelope.get("url", ""))
    yield compared(
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
        yield compared(
            line_no,
            "envelope",
            "a current report's supersession fields",
            [None] * 3,
            superseded,
        )
    elif status == "superseded":
        yield compared(
            line_no,
            "envelope",
            "superseded_reason is a known reason",
            True,
            envelope.get("superseded_reason") in ("re_evaluation", "suite_version_activated"),
        )
    else:
        yield failure(line_no, "envelope", "envelope.status", "current or superseded", status)


def on_suite_version(facts: Facts, line_no: int, line: SuiteVersionLine) -> Iterator[Finding]:
    """The suite version: its content's digest (line, body) and the scorers it pins."""
    facts.suite = content = line.content
    computed = digest_of(content)
    yield compared(
        line_no,
        "suite_digest",
        "the suite content's digest vs the line",
        line.digest,
        computed,
    )
    yield compared(
        line_no,
        "suite_digest",
        "the suite content's digest vs the body's suite_ref",
        facts.body.get("suite_ref", {}).get("digest"),
        computed,
    )
    for check in content.get("checks", []):
        # The shape admits a check without a scorer (a measure check has none); a scorer check
        # without one is not as the service wrote it, and already fails the digest above.
        scorer = check.get("scorer")
        if scorer is not None and "measure" not in check:
            facts.pinned[(scorer["name"], scorer["version"])] = scorer["digest"]


def on_scorer_version(facts: Facts, line_no: int, line: ScorerVersionLine) -> Iterator[Finding]:
    """A scorer version: its digest against the line and the suite's pin."""
    key = (line.name, line.version)
    if key in facts.scorer_lines:
        yield failure(line_no, "duplicate", f"a second line for scorer {key[0]} {key[1]}")
        return
    facts.scorer_lines[key] = line
    computed = digest_of(
        {"name": line.name, "version": line.version, "definition": line.definition}
    )
    yield compared(
        line_no,
        "scorer_digest",
        f"scorer {key[0]} {key[1]} vs the line",
        line.digest,
        computed,
    )
    yield compared(
        line_no,
        "scorer_digest",
        f"scorer {key[0]} {key[1]} vs the suite's pin",
        facts.pinned.get(key),
        computed,
    )


def on_check(facts: Facts, line_no: int, line: CheckLine) -> Iterator[Finding]:
    """A check: its result against the body's, its manifest against its evidence_refs."""
    check_id = line.check_id
    if check_id in facts.check_lines:
        yield failure(line_no, "duplicate", f"a second check line for {check_id!r}")
        return
    facts.check = line
    facts.last_case = None
    facts.last_label = None
    facts.check_lines[check_id] = line
    facts.check_line_numbers[check_id] = line_no
    body_checks = {c["check_id"]: c for c in facts.body.get("checks", [])}
    expected = body_checks.get(check_id)
    if expected is None:
        yield failure(line_no, "check_result", f"check {check_id!r} is not in the report body")
        return
    yield compared(
        line_no,
        "check_result",
        f"check {check_id!r} vs the report body",
        canonical_bytes(expected).decode(),
        canonical_bytes(line.result).decode(),
    )
    if expected.get("evidence_manifest"):
        manifest = line.manifest
        if manifest is None:
            yield failure(
                line_no, "manifest", f"check {check_id!r} has evidence_manifest but no manifest"
            )
        else:
            yield compared(
                line_no,
                "manifest",
                f"check {check_id!r} manifest vs its evidence_refs",
                (expected["evidence_refs"] or [None])[0],
                digest_of(manifest),
            )
    facts.evidence[check_id] = (line_no, EvidenceDigest())


def on_case(
    facts: Facts, reading: Reading, line_no: int, line: CaseLine | MalformedCase
) -> Iterator[Finding]:
    """A case of the report's evaluation or of the baseline's: in its check, in case order,
    joined to its tree, evidence list and absent outputs."""
    kind = line.kind
    check = facts.check
    check_id = line.check_id
    if check is None or check_id != check.check_id:
        yield failure(line_no, "order", f"a {kind} of {check_id!r} outside its check")
        return
    if isinstance(line, MalformedCase):
        yield failure(line_no, "malformed", f"a {kind} line: {line.problem}")
        return
    if facts.last_label is not None:
        yield failure(line_no, "order", f"a {kind} of {check_id!r} after the check's labels")
        return
    example_id, repeat = line.example_id, int(line.repeat)
    misplaced, read_on = _case_order(facts.last_case, line_no, kind, example_id, repeat)
    if misplaced is not None:
        yield misplaced
        if not read_on:
            return
    facts.last_case = (kind, example_id.encode(), repeat)
    fields = case_fields(line)
    facts.leaves.setdefault((kind, check_id), []).append(leaf_of(fields))
    if line.trace_ref is not UNSET:
        facts.traced_counts[(kind, check_id)] += 1
    if line.output is UNSET and line.output_digest is not None:
        facts.absent_outputs[(kind, check_id, example_id, repeat)] = (
            line_no,
            line.output_digest,
        )
    if kind == "case":
        evidence = facts.evidence.get(check_id)
        if evidence is None:
            # Its check line was refused (not in the body): the case has no evidence list to
            # join, and what follows cannot be told (the Node twin names it alike).
            yield failure(line_no, "malformed", f"a case of check {check_id!r}, not in the body")
            return
        evidence[1].add(fields)
    if line.output is not UNSET:
        yield from _output(facts, reading, line_no, line)
    if facts.keep_cases:
        facts.cases[kind].setdefault(check_id, []).append(fields)


def _case_order(
    last: tuple[str, bytes, int] | None, line_no: int, kind: str, example_id: str, repeat: int
) -> tuple[Failure | None, bool]:
    """A case out of case order, or None; and whether the case is read on all the same (a case
    after the baseline's is)."""
    if last is None:
        return None, True
    if last[0] == "baseline_case" and kind == "case":
        return failure(line_no, "order", "a case after the baseline's cases"), True
    position = (example_id.encode(), repeat)
    if last[0] == kind and position <= last[1:]:
        code = "duplicate" if position == last[1:] else "order"
        what = f"{kind} {example_id!r}/{repeat} is not in case order"
        return failure(line_no, code, what), False
    return None, True


def _output(facts: Facts, reading: Reading, line_no: int, line: CaseLine) -> Iterator[Finding]:
    """A case's output: allowed to the exporter, and its digest."""
    what = f"{line.kind} {line.check_id}/{line.example_id}/{line.repeat} output"
    return carried_body(facts, reading, line_no, "output", what, line.output_digest, line.output)


def on_items(facts: Facts, line_no: int, line: UnavailableLine | RedactedLine) -> Iterator[Finding]:
    """What the bundle could not include (unavailable) or was not permitted to (redacted),
    and why."""
    kind = line.kind
    items = line.items
    if type(items) is not list:
        yield failure(line_no, "item", f"the {kind} line's items is a list")
        return
    for item in items:
        problem = item_problem(kind, item)
        if problem is not None:
            yield failure(line_no, "item", problem)
            continue
        facts.items[kind].append({**item, "line": line_no})
        yield NotProven(f"{kind}: {item['what']} ({item['reason']})", item.get("count", 1))


def on_trailer(
    facts: Facts, reading: Reading, line_no: int, line: TrailerLine
) -> Iterator[Finding]:
    """The trailer: the line count and the sha256 of the lines before it."""
    reading.trailer_seen = True
    yield compared(line_no, "trailer_lines", "lines before the trailer", line.lines, line_no - 1)
    yield compared(
        line_no,
        "trailer_sha256",
        "sha256 of the lines before the trailer",
        line.sha256,
        DIGEST_PREFIX + reading.stream_hash.hexdigest(),
    )
