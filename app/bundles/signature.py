"""Who issued the report: the DSSE envelope of the report line against trusted keys."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from app.bundles.fields import key_problem, strict_base64
from app.bundles.results import Finding, NotProven, Proven, failure
from app.digest.canonical import canonical_bytes
from app.digest.signing import (
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    SUPERSESSION_PREDICATE,
    pae,
    report_statement,
)

if TYPE_CHECKING:
    from app.bundles.facts import Facts

NO_ATTESTATION = "signer: the report carries no attestation"
# {"keyid", "trusted"} of the key whose signature over the report verified
Signer = dict[str, object]


class KeyError_(ValueError):
    """A --key or --keys argument that is not a usable Ed25519 public key."""


def keyid(raw: bytes) -> str:
    """A key's id: sha256 of its 32 raw bytes."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def parse_key(text: str) -> bytes:
    """The raw 32 bytes of a key given as a PEM file, PEM text or base64 of the raw bytes."""
    candidate = text
    path = Path(text)
    if "\n" not in text and len(text) < 4096 and path.is_file():
        candidate = path.read_text()
    if "BEGIN PUBLIC KEY" in candidate:
        # Imported here: PEM parsing costs every other verification ~10 ms of start-up.
        from cryptography.hazmat.primitives import serialization

        try:
            public = serialization.load_pem_public_key(candidate.encode())
        except ValueError as exc:
            raise KeyError_(f"not a PEM public key: {exc}") from None
        if not isinstance(public, Ed25519PublicKey):
            raise KeyError_("not an Ed25519 public key")
        return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    raw = strict_base64(candidate.strip())
    if raw is None or len(raw) != 32:
        raise KeyError_("neither a PEM public key nor base64 of 32 Ed25519 bytes")
    return raw


def parse_keys_document(path: Path) -> dict[str, bytes]:
    """Every key of a keys document (`GET /.well-known/evalbook/keys`), by keyid."""
    try:
        return keys_of_document(path.read_bytes(), str(path))
    except OSError as exc:
        raise KeyError_(f"{path}: not a keys document ({exc})") from None


def keys_of_document(data: bytes, where: str) -> dict[str, bytes]:
    """Every key of a keys document's bytes, by keyid (`where` names it in errors)."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise KeyError_(f"{where}: not a keys document ({exc})") from None
    entries = document.get("keys") if type(document) is dict else None
    if type(entries) is not list:
        raise KeyError_(f'{where}: not a keys document (no "keys" list)')
    keys: dict[str, bytes] = {}
    for entry in entries:
        problem = key_problem(entry)
        if problem is not None:
            raise KeyError_(f"{where}: {problem}")
        keys[entry["keyid"]] = base64.b64decode(entry["public_key"])
    return keys


def signature_verifies(raw: bytes, signature: bytes, message: bytes) -> bool:
    """Whether an Ed25519 signature by the raw public key verifies over the message."""
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def envelope_problem(envelope: Any) -> str | None:
    """What is wrong with a DSSE envelope's shape, or None."""
    if type(envelope) is not dict or set(envelope) != {"payload", "payloadType", "signatures"}:
        return "the attestation is a DSSE envelope: payload, payloadType, signatures"
    if envelope["payloadType"] != PAYLOAD_TYPE:
        return f"the attestation's payloadType is {PAYLOAD_TYPE}"
    if strict_base64(envelope["payload"]) is None:
        return "the attestation's payload is base64"
    signatures = envelope["signatures"]
    if type(signatures) is not list or not signatures:
        return "the attestation has signatures"
    for signature in signatures:
        if (
            type(signature) is not dict
            or set(signature) != {"keyid", "sig"}
            or type(signature["keyid"]) is not str
            or strict_base64(signature["sig"]) is None
        ):
            return 'each signature is {"keyid", "sig"} with a base64 sig'
    return None


@dataclass(frozen=True)
class Trust:
    """The keys the verifier was given, and whether a trusted signature is required."""

    keys: dict[str, bytes]
    required: bool = False


def settle_signature(facts: Facts, trust: Trust) -> Generator[Finding, None, Signer | None]:
    """Prove the signed statement is this report's and return who signed it."""
    line_no = facts.report_line
    envelope = facts.attestation
    # A key given is a key required: whoever passes --key or --keys means "signed by this key",
    # as `cosign verify --key` does; a bundle signed otherwise, or not at all, fails.
    given = sorted(trust.keys)
    if envelope is None:
        yield NotProven(NO_ATTESTATION)
        if given:
            yield failure(
                line_no,
                "unsigned",
                f"the report carries no attestation; a signature by {_named(given)} was required",
            )
        elif trust.required:
            yield failure(line_no, "untrusted", "--require-trust: the report is not signed")
        return None
    problem = envelope_problem(envelope)
    if problem is not None:
        yield failure(line_no, "attestation", problem)
        return None
    body = facts.body
    payload = base64.b64decode(envelope["payload"])
    # Admission has shaped the body (a string report_id, an object subject); a subject
    # without a digest names nothing a statement could be about.
    expected = (
        report_statement(
            canonical_bytes(body), body["report_id"], facts.body_digest, body["subject"]
        )
        if "digest" in body["subject"]
        else None
    )
    if payload != expected:
        yield failure(line_no, "attestation", "the signed statement is not this report's")
        return None
    signer = yield from _report_signer(facts, trust, envelope, payload)
    if signer is None:
        return None
    yield Proven("signature")
    found: Signer = {"keyid": signer[0], "trusted": signer[1]}
    if signer[1]:
        return found
    if given:
        yield failure(
            line_no, "untrusted", f"signed by {signer[0]}, not by {_named(given)} (given)"
        )
    elif trust.required:
        yield failure(line_no, "untrusted", f"--require-trust: {signer[0]} is not a trusted key")
    return found


def _report_signer(
    facts: Facts, trust: Trust, envelope: dict[str, Any], payload: bytes
) -> Generator[Finding, None, tuple[str, bool] | None]:
    """(keyid, trusted) of the report's signer, a trusted key preferred; a signature that does
    not verify, or one by no key known, is a failure."""
    message = pae(PAYLOAD_TYPE, payload)
    line_no = facts.report_line
    signer: tuple[str, bool] | None = None
    known = False
    for signature in envelope["signatures"]:
        kid = signature["keyid"]
        for keys, trusted in ((trust.keys, True), (facts.bundle_keys, False)):
            raw = keys.get(kid)
            if raw is None:
                continue
            known = True
            if not signature_verifies(raw, base64.b64decode(signature["sig"]), message):
                yield failure(line_no, "signature", f"the signature by {kid} does not verify")
            elif signer is None or (trusted and not signer[1]):
                signer = (kid, trusted)
            break
    if not known:
        yield failure(line_no, "signature", "signed by no key given and none in the bundle")
    return signer


def _named(keyids: list[str]) -> str:
    """The keys given, as a failure names them."""
    return keyids[0] if len(keyids) == 1 else "one of " + ", ".join(keyids)


NO_SIGNED_SUPERSESSION = "status: superseded when exported, with no signed statement"


def first_signer(
    facts: Facts, trust: Trust, envelope: dict[str, Any], payload: bytes
) -> tuple[str, bool] | None:
    """(keyid, trusted) of the first signature that verifies, trusted keys first."""
    signatures = [(s["keyid"], base64.b64decode(s["sig"])) for s in envelope["signatures"]]
    return signer_among(trust.keys, facts.bundle_keys, signatures, payload)


def signer_among(
    trusted: dict[str, bytes],
    carried: dict[str, bytes],
    signatures: list[tuple[str, bytes]],
    payload: bytes,
) -> tuple[str, bool] | None:
    """(keyid, trusted) of the first of an in-toto envelope's (keyid, signature) pairs that
    verifies over its payload: by a trusted key first, then by a key the bundle carries."""
    message = pae(PAYLOAD_TYPE, payload)
    for keys, is_trusted in ((trusted, True), (carried, False)):
        for keyid, signature in signatures:
            raw = keys.get(keyid)
            if raw is not None and signature_verifies(raw, signature, message):
                return keyid, is_trusted
    return None


def _statement(payload: bytes) -> dict[str, Any] | None:
    try:
        statement = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if (
        type(statement) is not dict
        or statement.get("_type") != STATEMENT_TYPE
        or statement.get("predicateType") != SUPERSESSION_PREDICATE
        or type(statement.get("predicate")) is not dict
    ):
        return None
    return statement


def _signed_predicate(
    facts: Facts, trust: Trust, envelope: Any, given: list[str]
) -> Generator[Finding, None, dict[str, Any] | None]:
    """The predicate of a well-formed supersession statement whose signature verifies (by a
    key given, when keys are given); else None, its failure recorded."""
    line_no = facts.report_line
    problem = envelope_problem(envelope)
    if problem is not None:
        yield failure(line_no, "supersession", problem.replace("attestation", "statement"))
        return None
    payload = base64.b64decode(envelope["payload"])
    statement = _statement(payload)
    if statement is None:
        yield failure(line_no, "supersession", "not an in-toto supersession statement")
        return None
    signer = first_signer(facts, trust, envelope, payload)
    if signer is None:
        yield failure(line_no, "signature", "a supersession statement's signature does not verify")
        return None
    if given and not signer[1]:
        yield failure(
            line_no,
            "untrusted",
            f"a supersession statement signed by {signer[0]}, not by {_named(given)} (given)",
        )
        return None
    predicate: dict[str, Any] = statement["predicate"]
    return predicate


def settle_supersessions(facts: Facts, trust: Trust) -> Generator[Finding, None, str | None]:
    """Prove the report's status when exported from the signed supersession statements that
    name it (as superseded, or as the successor): `superseded by <id> at <time> (signed)`, or
    `current when exported` (None: the statements are no list)."""
    line_no = facts.report_line
    statements = facts.supersessions if facts.supersessions is not None else []
    if type(statements) is not list:
        yield failure(line_no, "supersession", "the report line's supersessions is a list")
        return None
    body = facts.body if type(facts.body) is dict else {}
    report_id, digest = body.get("report_id"), facts.body_digest
    given = sorted(trust.keys)
    superseded: dict[str, Any] | None = None
    for envelope in statements:
        predicate = yield from _signed_predicate(facts, trust, envelope, given)
        if predicate is None:
            continue
        if predicate.get("superseded_report_id") == report_id:
            if predicate.get("superseded_report_digest") != digest:
                yield failure(line_no, "supersession", "a statement supersedes another body")
                continue
            superseded = predicate
        elif predicate.get("successor_report_id") == report_id:
            if predicate.get("successor_report_digest") != digest:
                yield failure(line_no, "supersession", "a statement names another successor body")
                continue
        else:
            yield failure(line_no, "supersession", "a statement that does not name this report")
            continue
        facts.signed_statements.append((envelope, predicate))
        yield Proven("supersession")
    envelope_status = facts.envelope.get("status") if type(facts.envelope) is dict else None
    if superseded is not None:
        successor = superseded.get("successor_report_id") or "none (a suite version activated)"
        status = f"superseded by {successor} at {superseded.get('at')} (signed)"
        if envelope_status != "superseded":
            yield failure(
                line_no,
                "supersession",
                "the envelope says current; a signed statement says superseded",
            )
    elif envelope_status == "superseded":
        yield NotProven(NO_SIGNED_SUPERSESSION)
        return "superseded when exported (no signed statement)"
    else:
        return "current when exported"
    return status
