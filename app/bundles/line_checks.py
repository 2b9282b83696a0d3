"""What each kind of bundle line proves, one function per kind (the Verifier admits the line
first: known fields, required fields and their types, the bundle's order)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from app.bundles.fields import case_problem, item_problem, key_problem
from app.bundles.rebuild import DatasetDigest, EvidenceDigest
from app.bundles.results import Finding, NotProven, compared, failure
from app.bundles.trees import leaf_of
from app.canonical import DIGEST_PREFIX, canonical_bytes, digest_of

if TYPE_CHECKING:
    from app.bundles.verify import Verifier

# Kinds a bundle holds once.
ONCE = frozenset({"header", "report", "suite_version"})


def on_header(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """The header: the exporter's permissions and the bundle's keys."""
    verifier.header = value
    permissions = set(value.get("exporter", {}).get("permissions", []))
    verifier.may_hold_bodies = bool(permissions & {"dataset.read_body", "admin"})
    entries = value.get("keys", [])
    if type(entries) is not list:
        yield failure(line_no, "keys", "the header's keys is a list")
        return
    for entry in entries:
        problem = key_problem(entry)
        if problem is not None:
            yield failure(line_no, "keys", problem)
            continue
        verifier.bundle_keys[entry["keyid"]] = base64.b64decode(entry["public_key"])


def on_report(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """The report line: its body's digest and ids against the line and the header."""
    verifier.body = body = value["body"]
    verifier.report_line = line_no
    verifier.attestation = value.get("attestation")
    verifier.supersessions = value.get("supersessions")
    verifier.log = value.get("log")
    verifier.envelope = value.get("envelope")
    computed = verifier.body_digest = digest_of(body)
    yield compared(
        line_no, "report_digest", "the body's digest vs the line", value["digest"], computed
    )
    yield compared(
        line_no,
        "report_digest",
        "the body's digest vs the header",
        verifier.header.get("report_digest"),
        computed,
    )
    yield compared(
        line_no,
        "report_id",
        "the body's report_id vs the header",
        verifier.header.get("report_id"),
        body.get("report_id"),
    )
    yield from _envelope(verifier, line_no, body, value.get("envelope") or {})


def _envelope(
    verifier: Verifier, line_no: int, body: dict[str, Any], envelope: dict[str, Any]
) -> Iterator[Finding]:
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


def on_suite_version(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """The suite version: its content's digest (line, body) and the scorers it pins."""
    verifier.suite = content = value["content"]
    computed = digest_of(content)
    yield compared(
        line_no,
        "suite_digest",
        "the suite content's digest vs the line",
        value["digest"],
        computed,
    )
    yield compared(
        line_no,
        "suite_digest",
        "the suite content's digest vs the body's suite_ref",
        verifier.body.get("suite_ref", {}).get("digest"),
        computed,
    )
    for check in content.get("checks", []):
        scorer = check["scorer"]
        verifier.pinned[(scorer["name"], scorer["version"])] = scorer["digest"]


def on_scorer_version(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """A scorer version: its digest against the line and the suite's pin."""
    key = (value["name"], value["version"])
    if key in verifier.scorer_lines:
        yield failure(line_no, "duplicate", f"a second line for scorer {key[0]} {key[1]}")
        return
    verifier.scorer_lines[key] = value
    computed = digest_of(
        {"name": value["name"], "version": value["version"], "definition": value["definition"]}
    )
    yield compared(
        line_no,
        "scorer_digest",
        f"scorer {key[0]} {key[1]} vs the line",
        value["digest"],
        computed,
    )
    yield compared(
        line_no,
        "scorer_digest",
        f"scorer {key[0]} {key[1]} vs the suite's pin",
        verifier.pinned.get(key),
        computed,
    )


def on_dataset_version(
    verifier: Verifier, line_no: int, value: dict[str, Any]
) -> Iterator[Finding]:
    """A dataset version: opens its run of example lines."""
    verifier.close_dataset()
    if value["digest"] in verifier.datasets:
        yield failure(line_no, "duplicate", f"a second line for dataset {value['digest']}")
        return
    verifier.dataset = DatasetDigest(line_no, value)
    verifier.datasets[value["digest"]] = verifier.dataset


def on_example(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """An example: inside its dataset version, in id order, its body's digest."""
    dataset = verifier.dataset
    if dataset is None or value["dataset"] != dataset.fields["digest"]:
        yield failure(line_no, "order", "an example outside its dataset version")
        return
    example_id = value["id"]
    key = example_id.encode()
    if dataset.last_id is not None and key <= dataset.last_id:
        yield failure(line_no, "order", f"example {example_id!r} is not in id order")
    dataset.last_id = key
    dataset.add(example_id, value["body_digest"], value["tags"])
    if "body" in value:
        if not verifier.may_hold_bodies:
            yield failure(
                line_no,
                "body_without_permission",
                "an example body for an exporter without dataset.read_body",
            )
        yield compared(
            line_no,
            "body_digest",
            f"example {example_id!r} body",
            value["body_digest"],
            verifier.member_digest(b'"body":', b',"body_digest":', value["body"]),
        )
    else:
        verifier.absent_bodies.append((line_no, value["dataset"], example_id))


def on_check(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """A check: its result against the body's, its manifest against its evidence_refs."""
    check_id = value["check_id"]
    if check_id in verifier.check_lines:
        yield failure(line_no, "duplicate", f"a second check line for {check_id!r}")
        return
    verifier.check = value
    verifier.last_case = None
    verifier.check_lines[check_id] = value
    verifier.check_line_numbers[check_id] = line_no
    body_checks = {c["check_id"]: c for c in verifier.body.get("checks", [])}
    expected = body_checks.get(check_id)
    if expected is None:
        yield failure(line_no, "check_result", f"check {check_id!r} is not in the report body")
        return
    yield compared(
        line_no,
        "check_result",
        f"check {check_id!r} vs the report body",
        canonical_bytes(expected).decode(),
        canonical_bytes(value["result"]).decode(),
    )
    if expected.get("evidence_manifest"):
        manifest = value.get("manifest")
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
    verifier.evidence[check_id] = (line_no, EvidenceDigest())


def on_case(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """A case of the report's evaluation."""
    yield from _any_case(verifier, line_no, value, "case")


def on_baseline_case(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """A case of the baseline's evaluation."""
    yield from _any_case(verifier, line_no, value, "baseline_case")


def _any_case(
    verifier: Verifier, line_no: int, value: dict[str, Any], kind: str
) -> Iterator[Finding]:
    check = verifier.check
    check_id = value["check_id"]
    if check is None or check_id != check["check_id"]:
        yield failure(line_no, "order", f"a {kind} of {check_id!r} outside its check")
        return
    problem = case_problem(value)
    if problem is not None:
        yield failure(line_no, "malformed", f"a {kind} line: {problem}")
        return
    example_id, repeat = value["example_id"], int(value["repeat"])
    position = (kind, example_id.encode(), repeat)
    last = verifier.last_case
    if last is not None and last[0] == "baseline_case" and kind == "case":
        yield failure(line_no, "order", "a case after the baseline's cases")
    elif last is not None and last[0] == kind and position[1:] <= last[1:]:
        code = "duplicate" if position[1:] == last[1:] else "order"
        yield failure(line_no, code, f"{kind} {example_id!r}/{repeat} is not in case order")
        return
    verifier.last_case = position
    verifier.leaves.setdefault((kind, check_id), []).append(leaf_of(value))
    if "trace_ref" in value:
        verifier.traced_counts[(kind, check_id)] += 1
    if "output" not in value and value["output_digest"] is not None:
        verifier.absent_outputs[(kind, check_id, example_id, repeat)] = (
            line_no,
            value["output_digest"],
        )
    if kind == "case":
        evidence = verifier.evidence.get(check_id)
        if evidence is None:
            # Its check line was refused (not in the body): the case has no evidence list to
            # join, and what follows cannot be told (the Node twin names it alike).
            yield failure(line_no, "malformed", f"a case of check {check_id!r}, not in the body")
            return
        evidence[1].add(value)
    if "output" in value:
        if not verifier.may_hold_bodies:
            yield failure(
                line_no,
                "body_without_permission",
                "a case output for an exporter without dataset.read_body",
            )
        yield compared(
            line_no,
            "output_digest",
            f"{kind} {check_id}/{value['example_id']}/{value['repeat']} output",
            value.get("output_digest"),
            verifier.member_digest(b'"output":', b',"output_digest":', value["output"]),
        )
    if verifier.replay:
        verifier.cases[kind].setdefault(check_id, []).append(
            {k: v for k, v in value.items() if k != "output"}
        )


def on_unavailable(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """What the bundle could not include, and why."""
    yield from _items(verifier, line_no, value, "unavailable")


def on_redacted(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """What the exporter was not permitted to include."""
    yield from _items(verifier, line_no, value, "redacted")


def _items(verifier: Verifier, line_no: int, value: dict[str, Any], kind: str) -> Iterator[Finding]:
    items = value["items"]
    if type(items) is not list:
        yield failure(line_no, "item", f"the {kind} line's items is a list")
        return
    for item in items:
        problem = item_problem(kind, item)
        if problem is not None:
            yield failure(line_no, "item", problem)
            continue
        verifier.items[kind].append({**item, "line": line_no})
        yield NotProven(f"{kind}: {item['what']} ({item['reason']})", item.get("count", 1))


def on_trailer(verifier: Verifier, line_no: int, value: dict[str, Any]) -> Iterator[Finding]:
    """The trailer: the line count and the sha256 of the lines before it."""
    verifier.trailer_seen = True
    yield compared(
        line_no, "trailer_lines", "lines before the trailer", value.get("lines"), line_no - 1
    )
    yield compared(
        line_no,
        "trailer_sha256",
        "sha256 of the lines before the trailer",
        value.get("sha256"),
        DIGEST_PREFIX + verifier.stream_hash.hexdigest(),
    )


LINE_CHECKS: dict[str, Callable[[Verifier, int, dict[str, Any]], Iterator[Finding]]] = {
    "header": on_header,
    "report": on_report,
    "suite_version": on_suite_version,
    "scorer_version": on_scorer_version,
    "dataset_version": on_dataset_version,
    "example": on_example,
    "check": on_check,
    "case": on_case,
    "baseline_case": on_baseline_case,
    "unavailable": on_unavailable,
    "redacted": on_redacted,
    "trailer": on_trailer,
}
