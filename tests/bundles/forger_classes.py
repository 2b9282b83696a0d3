"""The forger classes of the trust contract (second edition, item 1) as conformance cases:
`python -m tests.bundles.forger_classes` writes one directory each, derived from rich_pass by
a forger's key (a fixed Ed25519 key, so the set is reproducible). Each `expected.json` holds,
besides the verdict without options, one run per option: with the genuine key (`--key`, the
keys document `--keys`), `--require-trust`, and both. Both verifiers are held to every run."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.digest.canonical import canonical_bytes
from app.digest.signing import PAYLOAD_TYPE, pae, report_statement
from tests.bundles.edits import Lines, index_of, kind, reseal
from tests.bundles.forgeries import _redigest

HERE = Path(__file__).resolve().parent
RICH = HERE / "rich_pass" / "bundle.jsonl.gz"
KEYS = HERE / "keys.json"
GENUINE: dict[str, Any] = json.loads(KEYS.read_text())["keys"][0]
FORGER = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
FORGER_RAW = FORGER.public_key().public_bytes(
    serialization.Encoding.Raw, serialization.PublicFormat.Raw
)
FORGER_KEYID = "sha256:" + hashlib.sha256(FORGER_RAW).hexdigest()

# Option sets, with `keys.json` standing for tests/bundles/keys.json.
OPTIONS: dict[str, list[str]] = {
    "none": [],
    "--key": ["--key", GENUINE["public_key"]],
    "--keys": ["--keys", "keys.json"],
    "--require-trust": ["--require-trust"],
    "--key --require-trust": ["--key", GENUINE["public_key"], "--require-trust"],
}

README = {
    "own_key_replacing_the_genuine": "The body edited (result fail) and re-digested, re-signed "
    "with the forger's own key, which replaces the genuine key in the header. Without a key "
    "it passes with the signer named NOT trusted; with the genuine key given (--key, --keys) "
    "or --require-trust it fails `untrusted`, naming the forger's key and the keys given.",
    "own_key_beside_the_genuine": "As own_key_replacing_the_genuine, with the forger's key "
    "beside the genuine one in the header.",
    "attestation_removed": "The body edited and re-digested, its attestation removed. Without "
    "a key it passes unsigned; with a key given it fails `unsigned`, with --require-trust "
    "`untrusted`.",
    "stale_attestation": "The body edited and re-digested, the genuine attestation left as it "
    "was: it is not this body's statement (`attestation`), with or without keys.",
    "forger_signature_under_the_genuine_keyid": "The body edited and re-digested, signed by "
    "the forger under the genuine key's id: the signature does not verify (`signature`).",
}


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


def forger_key_entry() -> dict[str, Any]:
    """The forger's key as a header lists it."""
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


def forgeries() -> dict[str, Lines]:
    """Each forger class, resealed (a careful forger recomputes the trailer)."""
    lines = gzip.decompress(RICH.read_bytes()).splitlines()
    edited = _redigest(_with_report(lines, lambda report: report["body"].update(result="fail")))
    made = {
        "own_key_replacing_the_genuine": _with_header_keys(
            _signed_by_forger(edited, FORGER_KEYID), [forger_key_entry()]
        ),
        "own_key_beside_the_genuine": _with_header_keys(
            _signed_by_forger(edited, FORGER_KEYID), [GENUINE, forger_key_entry()]
        ),
        "attestation_removed": _with_report(edited, lambda r: r.pop("attestation")),
        "stale_attestation": edited,
        "forger_signature_under_the_genuine_keyid": _signed_by_forger(edited, GENUINE["keyid"]),
    }
    return {name: reseal(lines) for name, lines in made.items()}


def arguments(args: list[str]) -> list[str]:
    """An option set with `keys.json` resolved to this directory's file."""
    return [str(KEYS) if a == "keys.json" else a for a in args]


def main() -> None:
    """Write each class's directory; its expectations are the Python verifier's outcomes (the
    conformance test holds the Node verifier to the same)."""
    from tests.bundle_helpers import python_verify

    for name, lines in forgeries().items():
        bundle = gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0)
        runs = []
        for option, args in OPTIONS.items():
            probe = HERE / "_probe.jsonl.gz"
            probe.write_bytes(bundle)
            code, outcome = python_verify(probe, *arguments(args))
            probe.unlink()
            runs.append(
                {
                    "option": option,
                    "args": args,
                    "exit": code,
                    "codes": sorted({f["code"] for f in outcome["failures"]}),
                }
            )
        plain = runs[0]
        directory = HERE / f"forger_{name}_{'pass' if plain['exit'] == 0 else 'fail'}"
        directory.mkdir(exist_ok=True)
        (directory / "bundle.jsonl.gz").write_bytes(bundle)
        (directory / "README.md").write_text(f"# {directory.name}\n\n{README[name]}\n")
        expected = {"exit": plain["exit"], "codes": plain["codes"], "exact": True, "runs": runs}
        (directory / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")


if __name__ == "__main__":
    main()
