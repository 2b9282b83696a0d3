"""A forger who edits a report and signs it again (trust contract, second edition, item 1): with
the genuine key given (--key, --keys), both verifiers refuse every forgery (exit 1,
`untrusted`, or `unsigned` without an attestation), naming the key that signed and the keys
given; without a key they prove what they can and name the signer as not trusted. Both
verifiers agree on the exit, the failures and the counts in every run."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.canonical import canonical_bytes
from app.signing import PAYLOAD_TYPE, pae, report_statement
from tests.bundle_helpers import REPO, node_verify, python_verify
from tests.bundles.edits import Lines, index_of, kind, reseal
from tests.bundles.forgeries import _redigest

RICH = REPO / "tests" / "bundles" / "rich_pass" / "bundle.jsonl.gz"
KEYS = REPO / "tests" / "bundles" / "keys.json"
GENUINE = json.loads(KEYS.read_text())["keys"][0]
FORGER = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
FORGER_RAW = FORGER.public_key().public_bytes(
    serialization.Encoding.Raw, serialization.PublicFormat.Raw
)
FORGER_KEYID = "sha256:" + hashlib.sha256(FORGER_RAW).hexdigest()


def _report(lines: Lines) -> tuple[int, dict[str, Any]]:
    at = index_of(lines, kind("report"))
    return at, orjson.loads(lines[at])


def _with_report(lines: Lines, change: Callable[[dict[str, Any]], None]) -> Lines:
    out = list(lines)
    at, report = _report(out)
    change(report)
    out[at] = rfc8785.dumps(report)
    return out


def _with_header_keys(lines: Lines, keys: list[dict[str, Any]]) -> Lines:
    header = orjson.loads(lines[0])
    header["keys"] = keys
    return [rfc8785.dumps(header), *lines[1:]]


def _forger_key_entry() -> dict[str, Any]:
    return {**GENUINE, "keyid": FORGER_KEYID, "public_key": base64.b64encode(FORGER_RAW).decode()}


def _signed_by_forger(lines: Lines, keyid: str) -> Lines:
    """The report's attestation made anew over its (edited) body, signed by the forger."""

    def sign(report: dict[str, Any]) -> None:
        body = report["body"]
        payload = report_statement(
            canonical_bytes(body), body["report_id"], report["digest"], body["subject"]
        )
        signature = FORGER.sign(pae(PAYLOAD_TYPE, payload))
        report["attestation"] = {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": PAYLOAD_TYPE,
            "signatures": [{"keyid": keyid, "sig": base64.b64encode(signature).decode()}],
        }

    return _with_report(lines, sign)


def _edited(lines: Lines) -> Lines:
    """The body's result changed and its digest recomputed (what a forger wants to say)."""
    out = _with_report(lines, lambda report: report["body"].update(result="fail"))
    return _redigest(out)


def _forgeries() -> dict[str, Lines]:
    lines = gzip.decompress(RICH.read_bytes()).splitlines()
    edited = _edited(lines)
    return {
        "own_key_replacing_the_genuine": _with_header_keys(
            _signed_by_forger(edited, FORGER_KEYID), [_forger_key_entry()]
        ),
        "own_key_beside_the_genuine": _with_header_keys(
            _signed_by_forger(edited, FORGER_KEYID), [GENUINE, _forger_key_entry()]
        ),
        "attestation_removed": _with_report(edited, lambda r: r.pop("attestation")),
        "stale_attestation": edited,
        "forger_signature_under_the_genuine_keyid": _signed_by_forger(edited, GENUINE["keyid"]),
    }


OPTIONS = {
    "none": (),
    "--key": ("--key", GENUINE["public_key"]),
    "--keys": ("--keys", str(KEYS)),
    "--require-trust": ("--require-trust",),
    "--key --require-trust": ("--key", GENUINE["public_key"], "--require-trust"),
}


def _failures(outcome: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [(f["line"], f["code"], f["what"]) for f in outcome["failures"]]


@pytest.mark.parametrize("name", list(_forgeries()))
def test_a_key_given_is_a_key_required(name: str, tmp_path: Path) -> None:
    bundle = tmp_path / f"{name}.jsonl.gz"
    bundle.write_bytes(gzip.compress(b"".join(line + b"\n" for line in reseal(_forgeries()[name]))))
    for option, extra in OPTIONS.items():
        python_code, python_outcome = python_verify(bundle, *extra)
        node_code, node_outcome = node_verify(bundle, *extra)
        context = (name, option, python_outcome["failures"], node_outcome["failures"])
        assert python_code == node_code, context
        assert _failures(python_outcome) == _failures(node_outcome), context
        assert python_outcome["proven"] == node_outcome["proven"], context
        assert python_outcome["not_proven"] == node_outcome["not_proven"], context
        if option != "none":
            assert python_code == 1, context  # every forgery is refused once a key is named
        codes = {code for _, code, _ in _failures(python_outcome)}
        if "--key" in option or "--keys" in option:
            if name == "attestation_removed":
                assert "unsigned" in codes, context
            elif name.startswith("own_key"):
                (what,) = [w for _, code, w in _failures(python_outcome) if code == "untrusted"]
                assert FORGER_KEYID in what and GENUINE["keyid"] in what, what
    # Without a key, a forger's own signature proves only that the forger signed.
    if name.startswith("own_key"):
        code, outcome = python_verify(bundle)
        assert code == 0 and outcome["signer"] == {"keyid": FORGER_KEYID, "trusted": False}


def test_the_genuine_bundle_passes_with_its_key_given() -> None:
    for option, extra in OPTIONS.items():
        if option == "--require-trust":
            continue
        for verify in (python_verify, node_verify):
            code, outcome = verify(RICH, *extra)
            assert code == 0, (option, outcome["failures"])
    unsigned = REPO / "tests" / "bundles" / "unsigned_report_pass" / "bundle.jsonl.gz"
    for verify in (python_verify, node_verify):
        assert verify(unsigned)[0] == 0
        code, outcome = verify(unsigned, "--keys", str(KEYS))
        assert code == 1 and [f["code"] for f in outcome["failures"]] == ["unsigned"]


def _is_accuracy_case(value: dict[str, Any]) -> bool:
    return bool(value["kind"] == "case" and value["check_id"] == "accuracy")


def _no_line_kept(proof: str) -> Lines:
    """case_limit_pass with every case line of `accuracy` left out (m = 0): its case_limit
    item counts them all and carries an empty proof, or the proof it had (`junk` here)."""
    source = REPO / "tests" / "bundles" / "case_limit_pass" / "bundle.jsonl.gz"
    lines = gzip.decompress(source.read_bytes()).splitlines()
    kept, first = [], None
    for line in lines:
        value = orjson.loads(line)
        if _is_accuracy_case(value):
            first = first or {"example_id": value["example_id"], "repeat": value["repeat"]}
            continue
        if value["kind"] in ("unavailable", "redacted"):
            items = []
            for item in value["items"]:
                ref = item.get("ref", {})
                if item.get("reason") == "case_limit" and ref == {
                    "check_id": "accuracy",
                    "kind": "case",
                }:
                    left_out = item["count"] + sum(
                        1 for other in map(orjson.loads, lines) if _is_accuracy_case(other)
                    )
                    item.update(count=left_out, first=first)
                    if proof == "empty":
                        item["consistency_proof"] = []
                elif ref.get("check_id") == "accuracy" and ref.get("kind") == "case":
                    continue  # an item about a case line no longer there
                items.append(item)
            value["items"] = items
            line = rfc8785.dumps(value)
        kept.append(line)
    return reseal(kept)


def test_a_case_limit_with_no_line_kept_takes_no_proof(tmp_path: Path) -> None:
    outcomes = {}
    for proof in ("empty", "junk"):
        bundle = tmp_path / f"{proof}.jsonl.gz"
        bundle.write_bytes(gzip.compress(b"".join(line + b"\n" for line in _no_line_kept(proof))))
        python_code, python_outcome = python_verify(bundle)
        node_code, node_outcome = node_verify(bundle)
        assert python_code == node_code
        assert _failures(python_outcome) == _failures(node_outcome)
        outcomes[proof] = (python_code, [code for _, code, _ in _failures(python_outcome)])
    assert outcomes == {"empty": (0, []), "junk": (1, ["item"])}
