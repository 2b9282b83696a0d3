"""A forger who edits a report and signs it again (trust contract, second edition, item 1): with
the genuine key given (--key, --keys), both verifiers refuse every forgery (exit 1,
`untrusted`, or `unsigned` without an attestation), naming the key that signed and the keys
given; without a key they prove what they can and name the signer as not trusted. Both
verifiers agree on the exit, the failures and the counts in every run."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785

from tests.bundle_helpers import REPO, node_verify, python_verify
from tests.bundles.edits import Lines, reseal
from tests.bundles.forger_classes import FORGER_KEYID, GENUINE, forgeries

RICH = REPO / "tests" / "bundles" / "rich_pass" / "bundle.jsonl.gz"
KEYS = REPO / "tests" / "bundles" / "keys.json"


def _forgeries() -> dict[str, Lines]:
    return forgeries()


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
    bundle.write_bytes(gzip.compress(b"".join(line + b"\n" for line in _forgeries()[name])))
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
