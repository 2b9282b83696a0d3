"""`evalbook gate --verify-log`: the gate trusts a report only once the transparency log
holds it, as the go command trusts a module only once the checksum database does.

For each report the gate is about to decide on: its signature (DSSE, by a key of the keys
document or of `--keys`), its log entry (this report's digest and attestation), the entry's
inclusion in a checkpoint signed by the log's key, and that checkpoint's consistency with the
one the gate kept from its last run (the state file). Any contradiction is a security error:
exit 69, whatever the reports say. The state keeps the log's verifier key and the newest
checkpoint seen, so a log that forks or rewinds between two gate runs is caught by the second."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import rfc8785

from app.bundles.signature import (
    KeyError_,
    keys_of_document,
    parse_keys_document,
    signature_verifies,
)
from app.cli.log_checks import Refused, consistent, log_verifier
from app.digest.canonical import canonical_bytes
from app.digest.merkle import leaf_hash, verify_inclusion
from app.digest.signing import PAYLOAD_TYPE, pae, report_statement
from app.tlog import checkpoint as checkpoints
from app.tlog import note as notes

SECURITY_ERROR = 69
REPORTS = "/evaluations/api/reports"
DEFAULT_STATE = Path.home() / ".cache" / "evalbook" / "log-state.json"


class SecurityError(Exception):
    """The service contradicts its signatures or its log: it cannot be trusted (exit 69)."""


@dataclass
class LogCheck:
    """What `--verify-log` was given: the state file, a pinned log key, trusted signing keys,
    how long to wait for a checkpoint to cover a new report."""

    state_path: Path
    log_key: str | None = None
    keys_file: Path | None = None
    wait_seconds: float = 10.0


def verify_reports(
    base_url: str, token: str, reports: list[dict[str, Any]], check: LogCheck
) -> int:
    """Check every report against its signature and the log; the newest checkpoint size kept.
    SecurityError on any contradiction; httpx.HTTPError when the service does not answer."""
    state = _read_state(check.state_path)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=60) as http:
        try:
            verifier = log_verifier(http, check.log_key or state.get("log_vkey"))
        except (notes.NoteError, KeyError, TypeError, ValueError) as exc:
            raise SecurityError(f"the log's key is unusable: {exc}") from None
        if state.get("log_vkey") not in (None, verifier.vkey()):
            raise SecurityError(
                f"the log's key is {verifier.vkey()}, not {state['log_vkey']} as kept in "
                f"{check.state_path} (a rotated log starts a new origin: remove the state "
                "file only if the operator announced it)"
            )
        keys = _signing_keys(http, check.keys_file)
        kept = checkpoints.parse(state["note"]) if "note" in state else None
        for report in reports:
            _check_signature(http, report, keys)
            seen = _check_logged(http, report, verifier, check.wait_seconds)
            kept = _consistent_with_kept(http, kept, seen)
    assert kept is not None or not reports
    if kept is not None:
        _write_state(check.state_path, {"log_vkey": verifier.vkey(), "note": kept.text()})
    return 0 if kept is None else kept.size


def _read_state(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SecurityError(f"{path}: the kept log state is unreadable ({exc})") from None
    if type(state) is not dict:
        raise SecurityError(f"{path}: the kept log state is not an object")
    return state


def _write_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state, indent=2))
    os.replace(temporary, path)


def _signing_keys(http: httpx.Client, keys_file: Path | None) -> dict[str, bytes]:
    """The report signing keys: `--keys`, else the service's keys document."""
    try:
        if keys_file is not None:
            return parse_keys_document(keys_file)
        answer = http.get("/.well-known/evalbook/keys")
        answer.raise_for_status()
        return keys_of_document(answer.content, "the keys document")
    except KeyError_ as exc:
        raise SecurityError(str(exc)) from None


def _check_signature(http: httpx.Client, report: dict[str, Any], keys: dict[str, bytes]) -> None:
    """The report's DSSE envelope states exactly this report, signed by a trusted key."""
    name = report["report_id"]
    body_bytes = canonical_bytes(report["body"])
    if "sha256:" + hashlib.sha256(body_bytes).hexdigest() != report["digest"]:
        raise SecurityError(f"report {name}: the body does not hash to its digest")
    # Paths on the service the gate asked, never the envelope's URLs (another host's).
    answer = http.get(f"{REPORTS}/{name}/attestation")
    answer.raise_for_status()
    envelope = answer.json()
    payload = base64.b64decode(envelope.get("payload", ""))
    expected = report_statement(body_bytes, name, report["digest"], report["body"]["subject"])
    if envelope.get("payloadType") != PAYLOAD_TYPE or payload != expected:
        raise SecurityError(f"report {name}: the signed statement is not this report's")
    message = pae(PAYLOAD_TYPE, payload)
    for signature in envelope.get("signatures", []):
        raw = keys.get(signature.get("keyid"))
        if raw is not None and signature_verifies(raw, base64.b64decode(signature["sig"]), message):
            report["_attestation_digest"] = (
                "sha256:" + hashlib.sha256(rfc8785.dumps(envelope)).hexdigest()
            )
            return
    raise SecurityError(f"report {name}: no valid signature by a trusted key")


def _check_logged(
    http: httpx.Client, report: dict[str, Any], verifier: notes.Verifier, wait_seconds: float
) -> checkpoints.Checkpoint:
    """The report's entry, proven included in a checkpoint the log's key signed."""
    name = report["report_id"]
    deadline = time.monotonic() + wait_seconds
    while True:
        answer = http.get(f"{REPORTS}/{name}/log")
        if answer.status_code == 404:
            raise SecurityError(f"report {name}: the log holds no entry for it")
        answer.raise_for_status()
        logged = answer.json()
        if logged.get("checkpoint") is not None or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    entry = logged.get("entry") or {}
    if entry.get("kind") != "report" or entry.get("report_id") != name:
        raise SecurityError(f"report {name}: the log's entry names another report")
    if entry.get("report_digest") != report["digest"]:
        raise SecurityError(f"report {name}: the log's entry names another report digest")
    if entry.get("attestation_digest") != report.pop("_attestation_digest"):
        raise SecurityError(f"report {name}: the log's entry names another attestation")
    if report["envelope"].get("log_index") not in (None, logged["index"]):
        raise SecurityError(f"report {name}: the envelope and the log disagree on its index")
    if logged.get("checkpoint") is None:
        raise SecurityError(f"report {name}: no checkpoint covers it after {wait_seconds:g} s")
    try:
        text = notes.verify(logged["checkpoint"].encode(), verifier)
        seen = checkpoints.parse(text)
        proof = [base64.b64decode(p, validate=True) for p in logged["inclusion_proof"]]
    except (notes.NoteError, checkpoints.CheckpointError, ValueError, TypeError) as exc:
        raise SecurityError(f"report {name}: the checkpoint does not verify: {exc}") from None
    leaf = leaf_hash(rfc8785.dumps(entry))
    if not verify_inclusion(leaf, logged["index"], seen.size, proof, seen.root):
        raise SecurityError(f"report {name}: the inclusion proof does not lead to the checkpoint")
    return seen


def _consistent_with_kept(
    http: httpx.Client, kept: checkpoints.Checkpoint | None, seen: checkpoints.Checkpoint
) -> checkpoints.Checkpoint:
    """The later of the two checkpoints, once the earlier is proven a prefix of it."""
    if kept is None:
        return seen
    if kept.origin != seen.origin:
        raise SecurityError(f"the log's origin is {seen.origin!r}, not {kept.origin!r} as kept")
    older, newer = (kept, seen) if kept.size <= seen.size else (seen, kept)
    try:
        consistent(http, older, newer)
    except Refused as exc:
        raise SecurityError(
            f"the log contradicts the checkpoint kept from the last run: {exc} "
            f"(kept: size {kept.size}; served: size {seen.size})"
        ) from None
    return newer
