"""Which fields each line and item may carry, and the types a case line's fields must have.

The two verifiers share these tables (verify-bundle.mjs spells them the same way): an unknown
field is refused, a mistyped case field is a named failure rather than a crash later on.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

from app.bundles.results import REQUIRED
from app.domain.vocabulary import ASSURANCE_LEVELS, CASE_STATUSES

OPTIONAL: dict[str, tuple[str, ...]] = {
    "header": ("keys",),
    "report": ("attestation", "supersessions", "log", "test_result"),
    "example": ("body",),
    "check": ("manifest",),
    "case": ("output", "trace_ref"),
    "baseline_case": ("output", "trace_ref"),
}
ALLOWED = {
    kind: frozenset(("kind", *required, *OPTIONAL.get(kind, ())))
    for kind, required in REQUIRED.items()
}
DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
MAX_SAFE_INTEGER = 2**53 - 1
KEY_FIELDS = frozenset({"keyid", "alg", "public_key", "status", "created_at", "retired_at"})

# what an item may name, per list and reason; the fields of its ref; whether it has a count
ITEM_WHAT = {
    ("unavailable", "stored_at_sso"): ("case_output",),
    ("unavailable", "retention"): ("example_body", "case_output"),
    ("unavailable", "scorer_missing"): ("scorer_version",),
    ("unavailable", "scorer_digest_mismatch"): ("scorer_version",),
    ("unavailable", "case_limit"): ("cases",),
    ("redacted", "permission"): ("example_bodies", "case_outputs"),
    ("redacted", "trace_capture_policy"): ("trace_bodies",),
}
REF_FIELDS = {
    "scorer_version": ("digest", "name", "version"),
    "example_body": ("dataset", "example_id"),
    "example_bodies": ("dataset",),
    "case_output": ("check_id", "example_id", "kind", "repeat"),
    "case_outputs": ("check_id", "kind"),
    "trace_bodies": ("check_id", "kind"),
    "cases": ("check_id", "kind"),
}
ITEM_EXTRA = {
    "scorer_version": (),
    "example_body": (),
    "example_bodies": ("count",),
    "case_output": ("digest",),
    "case_outputs": ("count",),
    "trace_bodies": ("count",),
    "cases": ("count", "first", "last", "consistency_proof"),
}


def is_integer(value: Any) -> bool:
    """A JSON integer in 0..2^53-1 (1.0 counts: JSON has one number type)."""
    if type(value) is int:
        return 0 <= value <= MAX_SAFE_INTEGER
    return type(value) is float and value.is_integer() and 0 <= value <= MAX_SAFE_INTEGER


def is_digest(value: Any) -> bool:
    """A `sha256:<64 lowercase hex>` string."""
    return type(value) is str and DIGEST.match(value) is not None


def strict_base64(value: Any) -> bytes | None:
    """The bytes of a base64 string written the one standard way, else None."""
    if type(value) is not str:
        return None
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if base64.b64encode(data).decode() == value else None


def case_problem(value: dict[str, Any]) -> str | None:
    """What is wrong with a case line's field types, or None."""
    if type(value["check_id"]) is not str or type(value["example_id"]) is not str:
        return "check_id and example_id are strings"
    if not is_integer(value["repeat"]):
        return "repeat is an integer from 0"
    if value["status"] not in CASE_STATUSES:
        return "status is a case status"
    score = value["score"]
    if score is not None and (type(score) not in (int, float) or type(score) is bool):
        return "score is a number or null"
    if value["output_digest"] is not None and not is_digest(value["output_digest"]):
        return "output_digest is a digest or null"
    refs = value["evidence_refs"]
    if type(refs) is not list or not all(is_digest(r) for r in refs):
        return "evidence_refs is a list of digests"
    if value["assurance"] not in ASSURANCE_LEVELS:
        return "assurance is an assurance level"
    if not is_digest(value["scorer_digest"]):
        return "scorer_digest is a digest"
    if "trace_ref" in value:
        trace = value["trace_ref"]
        if (
            type(trace) is not dict
            or set(trace) != {"digest", "id"}
            or type(trace["id"]) is not str
            or not is_digest(trace["digest"])
        ):
            return 'trace_ref is {"digest", "id"}'
    return None


def item_problem(kind: str, item: Any) -> str | None:
    """What is wrong with an unavailable or redacted item's shape, or None."""
    if type(item) is not dict or not {"what", "ref", "reason"} <= item.keys():
        return f"a {kind} item without what, ref and reason"
    allowed = ITEM_WHAT.get((kind, item["reason"]) if type(item["reason"]) is str else ("", ""))
    if allowed is None:
        return f"a {kind} item's reason"
    what = item["what"]
    if what not in allowed:
        return f"a {kind} item of reason {item['reason']} names {what!r}"
    extra = set(item) - {"what", "ref", "reason", *ITEM_EXTRA[what]}
    if item["reason"] == "stored_at_sso":
        extra.discard("object_key")
        if type(item.get("object_key")) is not str:
            return "a stored_at_sso item gives the object_key"
    if extra:
        return f"a {kind} item with unknown fields {sorted(extra)}"
    return _item_ref_problem(what, item["ref"]) or _item_extra_problem(what, item)


def _item_ref_problem(what: str, ref: Any) -> str | None:
    """What is wrong with an item's ref (exactly the fields its `what` names), or None."""
    if type(ref) is not dict or tuple(sorted(ref)) != REF_FIELDS[what]:
        return f"a {what} item's ref has exactly {', '.join(REF_FIELDS[what])}"
    for name in REF_FIELDS[what]:
        if name == "repeat":
            if not is_integer(ref[name]):
                return f"a {what} item's ref.repeat"
        elif type(ref[name]) is not str:
            return f"a {what} item's ref.{name}"
    if "kind" in ref and ref["kind"] not in ("case", "baseline_case"):
        return f"a {what} item's ref.kind"
    return None


def _item_extra_problem(what: str, item: dict[str, Any]) -> str | None:
    """What is wrong with the fields an item of `what` adds (count, digest, cases), or None."""
    if "count" in ITEM_EXTRA[what] and (not is_integer(item.get("count")) or item["count"] < 1):
        return f"a {what} item's count"
    if what == "case_output" and not is_digest(item.get("digest")):
        return "a case_output item's digest"
    if what != "cases":
        return None
    proof = item.get("consistency_proof", [])
    if type(proof) is not list or not all(is_digest(p) for p in proof):
        return "a cases item's consistency_proof is a list of digests"
    for end in ("first", "last"):
        bound = item.get(end, {"example_id": "", "repeat": 0})
        if (
            type(bound) is not dict
            or set(bound) != {"example_id", "repeat"}
            or type(bound["example_id"]) is not str
            or not is_integer(bound["repeat"])
        ):
            return f"a cases item's {end} is {{example_id, repeat}}"
    return None


def key_problem(entry: Any) -> str | None:
    """What is wrong with a public key entry of the header, or None."""
    if type(entry) is not dict or set(entry) != KEY_FIELDS:
        return "a key entry has keyid, alg, public_key, status, created_at, retired_at"
    raw = strict_base64(entry["public_key"])
    if entry["alg"] != "ed25519" or raw is None or len(raw) != 32:
        return "a key entry's public_key is base64 of 32 Ed25519 bytes"
    if entry["keyid"] != "sha256:" + hashlib.sha256(raw).hexdigest():
        return "a key entry's keyid is not the sha256 of its public key"
    return None


def _strings(value: Any, *names: str) -> bool:
    return type(value) is dict and all(type(value.get(n)) is str for n in names)


def _comparison_ok(comparison: Any) -> bool:
    return comparison is None or type(comparison) is dict


def body_problem(body: Any) -> str | None:
    """What is wrong with the shape of the report body's parts a verifier reads, or None."""
    if type(body) is not dict:
        return "the body is an object"
    if type(body.get("report_id")) is not str or type(body.get("subject")) is not dict:
        return "the body has a report_id and a subject"
    if not _strings(body.get("suite_ref"), "digest"):
        return "the body's suite_ref has a digest"
    refs = body.get("dataset_refs")
    if type(refs) is not list or not all(_strings(r, "digest", "name", "version") for r in refs):
        return "the body's dataset_refs are {digest, name, version}"
    checks = body.get("checks")
    if type(checks) is not list:
        return "the body's checks are a list"
    for check in checks:
        if (
            type(check) is not dict
            or type(check.get("check_id")) is not str
            or type(check.get("evidence_refs")) is not list
            or type(check.get("evidence_manifest")) is not bool
            or not _comparison_ok(check.get("comparison"))
            or type(check.get("slices", [])) is not list
            or not all(
                type(s) is dict and _comparison_ok(s.get("comparison"))
                for s in check.get("slices", [])
            )
        ):
            return "each check of the body has check_id, evidence_refs, evidence_manifest"
    return None


def shape_problem(kind: str, value: dict[str, Any]) -> str | None:
    """What is wrong with the types of a (non-case) line's fields, or None."""
    if kind == "header":
        exporter = value["exporter"]
        if (
            not _strings(value, "format", "report_id", "report_digest", "created_at")
            or not _strings(exporter, "token_name")
            or type(exporter.get("permissions")) is not list
            or not all(type(p) is str for p in exporter["permissions"])
            or type(value["producer"]) is not dict
            or not (
                value["baseline_evaluation_id"] is None
                or type(value["baseline_evaluation_id"]) is str
            )
        ):
            return "the header's fields have the wrong types"
    elif kind == "report":
        if type(value["digest"]) is not str or type(value["envelope"]) is not dict:
            return "the report line has a digest and an envelope object"
        return body_problem(value["body"])
    elif kind == "suite_version":
        content = value["content"]
        if type(value["digest"]) is not str or type(content) is not dict:
            return "the suite_version line has a digest and a content object"
        checks = content.get("checks", [])
        if type(checks) is not list or not all(
            type(c) is dict
            and _strings(c.get("scorer"), "name", "version", "digest")
            and _strings(c.get("dataset"), "digest")
            and type(c.get("check_id")) is str
            for c in checks
        ):
            return "the suite's checks have check_id, scorer and dataset"
    elif kind == "scorer_version":
        if not _strings(value, "name", "version", "digest"):
            return "a scorer_version line's name, version and digest are strings"
    elif kind == "dataset_version":
        if not _strings(value, "name", "version", "digest") or not is_integer(
            value["example_count"]
        ):
            return "a dataset_version line's name, version, digest, example_count"
    elif kind == "example":
        tags = value["tags"]
        if (
            not _strings(value, "dataset", "id", "body_digest")
            or type(tags) is not list
            or not all(type(t) is str for t in tags)
        ):
            return "an example line's dataset, id, body_digest and tags"
    elif kind == "check" and type(value["check_id"]) is not str:
        return "a check line's check_id is a string"
    return None
