"""What an unavailable or redacted item and a header's key entry must hold (their tables are in
app/bundles/format.py; verify-bundle.mjs reads the same tables): a malformed one is a named
failure rather than a crash later on."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from app.bundles.format import ITEM_EXTRA, ITEM_WHAT, KEY_FIELDS, REF_FIELDS
from app.bundles.shapes import is_digest, is_integer

_KEY_FIELDS = frozenset(KEY_FIELDS)


def strict_base64(value: Any) -> bytes | None:
    """The bytes of a base64 string written the one standard way, else None."""
    if type(value) is not str:
        return None
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if base64.b64encode(data).decode() == value else None


def item_problem(kind: str, item: Any) -> str | None:
    """What is wrong with an unavailable or redacted item's shape, or None."""
    if type(item) is not dict or not {"what", "ref", "reason"} <= item.keys():
        return f"a {kind} item without what, ref and reason"
    allowed = ITEM_WHAT.get(f"{kind} {item['reason']}") if type(item["reason"]) is str else None
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
    if type(ref) is not dict or sorted(ref) != REF_FIELDS[what]:
        return f"a {what} item's ref has exactly {', '.join(REF_FIELDS[what])}"
    for name in REF_FIELDS[what]:
        if name == "repeat":
            if not is_integer(ref[name]):
                return f"a {what} item's ref.repeat"
        elif type(ref[name]) is not str:
            return f"a {what} item's ref.{name}"
    kinds = ("label", "baseline_label") if what == "label_notes" else ("case", "baseline_case")
    if "kind" in ref and ref["kind"] not in kinds:
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
    if type(entry) is not dict or set(entry) != _KEY_FIELDS:
        return "a key entry has keyid, alg, public_key, status, created_at, retired_at"
    raw = strict_base64(entry["public_key"])
    if entry["alg"] != "ed25519" or raw is None or len(raw) != 32:
        return "a key entry's public_key is base64 of 32 Ed25519 bytes"
    if entry["keyid"] != "sha256:" + hashlib.sha256(raw).hexdigest():
        return "a key entry's keyid is not the sha256 of its public key"
    return None
