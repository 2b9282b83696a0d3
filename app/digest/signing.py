"""Ed25519 signing keys and the signed report statement (in-toto Statement v1 in a DSSE v1
envelope). Pure: no database. The service keeps which key is active in the database
(app/services/signing.py) and the private keys as PKCS#8 PEM files."""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
REPORT_PREDICATE = "https://evalbook.dev/attestations/report/v1"
SUPERSESSION_PREDICATE = "https://evalbook.dev/attestations/supersession/v1"
BOARD_PREDICATE = "https://evalbook.dev/board/v1"
VSA_PREDICATE = "https://slsa.dev/verification_summary/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
ENVELOPE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"


class KeyFileError(ValueError):
    """A signing key file that cannot be used, named in the message."""


def keyid_of(public: Ed25519PublicKey) -> str:
    """`sha256:<hex>` of the raw 32-byte public key."""
    return "sha256:" + hashlib.sha256(raw_public(public)).hexdigest()


def raw_public(public: Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of a public key."""
    return public.public_bytes_raw()


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PKCS#8 PEM file; KeyFileError names the file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"signing key file {path}: cannot be read ({exc.strerror})") from exc
    # PEM's module (with SSH, PKCS#12 and every key type) is imported here, not at the top:
    # the offline verifier imports this module and never reads a private key.
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"signing key file {path}: not an unencrypted PKCS#8 PEM key") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"signing key file {path}: not an Ed25519 key")
    return key


def write_private_key(directory: Path, key: Ed25519PrivateKey) -> Path:
    """Write a key as `<keyid hex>.pem`, mode 0600, created atomically."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = keyid_of(key.public_key()).removeprefix("sha256:") + ".pem"
    target = directory / name
    from cryptography.hazmat.primitives import serialization

    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    temporary = directory / f".{name}.{os.getpid()}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(pem)
    os.replace(temporary, target)
    return target


@dataclass(frozen=True)
class KeyRing:
    """The private keys this process can sign with, by keyid."""

    keys: dict[str, Ed25519PrivateKey]

    @classmethod
    def load(cls, directory: Path, key_file: Path | None) -> KeyRing:
        """Every `*.pem` of the directory, and the configured key file (errors name the file)."""
        keys: dict[str, Ed25519PrivateKey] = {}
        if directory.is_dir():
            for path in sorted(directory.glob("*.pem")):
                key = load_private_key(path)
                keys[keyid_of(key.public_key())] = key
        if key_file is not None:
            key = load_private_key(key_file)
            keys[keyid_of(key.public_key())] = key
        return cls(keys)


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def envelope(payload: bytes, key: Ed25519PrivateKey) -> bytes:
    """A DSSE envelope of an in-toto payload signed with `key`, as canonical JSON bytes."""
    signature = key.sign(pae(PAYLOAD_TYPE, payload))
    return rfc8785.dumps(
        {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": PAYLOAD_TYPE,
            "signatures": [
                {"keyid": keyid_of(key.public_key()), "sig": base64.b64encode(signature).decode()}
            ],
        }
    )


def statement_subject(subject: dict[str, Any]) -> list[dict[str, Any]]:
    """The statement's subject: the subject's `name` (or "subject") and its digest."""
    algorithm, _, value = str(subject["digest"]).partition(":")
    name = subject.get("name")
    return [{"name": name if isinstance(name, str) else "subject", "digest": {algorithm: value}}]


def report_statement(
    body_bytes: bytes, report_id: str, report_digest: str, subject: dict[str, Any]
) -> bytes:
    """The report statement's canonical JSON, built around the body's canonical bytes (RFC 8785
    orders the keys: _type, predicate {body, report_digest, report_id}, predicateType,
    subject), so the body is not canonicalized a second time."""
    return _statement_around(
        REPORT_PREDICATE, ("body", body_bytes), ("report", report_id, report_digest), subject
    )


def board_statement(body_bytes: bytes, board_id: str, board_digest: str) -> bytes:
    """A board statement's canonical JSON around the body's canonical bytes (predicate
    {board, board_digest, board_id}); its subject is the board, `board:<id>` with its digest."""
    subject = {"name": f"board:{board_id}", "digest": board_digest}
    return _statement_around(
        BOARD_PREDICATE, ("board", body_bytes), ("board", board_id, board_digest), subject
    )


def _statement_around(
    predicate_type: str,
    body: tuple[str, bytes],
    named: tuple[str, str, str],
    subject: dict[str, Any],
) -> bytes:
    """A statement whose predicate is {<body key>: body, <kind>_digest, <kind>_id}, in RFC 8785
    order as long as the body's key sorts before `<kind>_digest` (as "body" and "board" do)."""
    kind, identifier, digest = named
    return b"".join(
        (
            b'{"_type":',
            rfc8785.dumps(STATEMENT_TYPE),
            b',"predicate":{',
            rfc8785.dumps(body[0]),
            b":",
            body[1],
            b",",
            rfc8785.dumps(f"{kind}_digest"),
            b":",
            rfc8785.dumps(digest),
            b",",
            rfc8785.dumps(f"{kind}_id"),
            b":",
            rfc8785.dumps(identifier),
            b'},"predicateType":',
            rfc8785.dumps(predicate_type),
            b',"subject":',
            rfc8785.dumps(statement_subject(subject)),
            b"}",
        )
    )


def supersession_statement(predicate: dict[str, Any], subject: dict[str, Any]) -> bytes:
    """A supersession statement's canonical JSON (subject: the superseded report's subject)."""
    return statement(SUPERSESSION_PREDICATE, predicate, subject)


def statement(predicate_type: str, predicate: dict[str, Any], subject: dict[str, Any]) -> bytes:
    """Any statement's canonical JSON about an EvalBook subject."""
    return rfc8785.dumps(
        {
            "_type": STATEMENT_TYPE,
            "subject": statement_subject(subject),
            "predicateType": predicate_type,
            "predicate": predicate,
        }
    )


def verify_envelope(envelope_bytes: bytes, public_keys: dict[str, bytes]) -> dict[str, Any]:
    """The statement of an envelope whose signature verifies with one of `public_keys`
    (keyid -> 32 raw bytes); ValueError otherwise."""
    document = orjson.loads(envelope_bytes)
    if document.get("payloadType") != PAYLOAD_TYPE:
        raise ValueError("not an in-toto DSSE envelope")
    payload = base64.b64decode(document["payload"], validate=True)
    for signature in document.get("signatures") or []:
        raw = public_keys.get(signature.get("keyid"))
        if raw is None:
            continue
        try:
            Ed25519PublicKey.from_public_bytes(raw).verify(
                base64.b64decode(signature["sig"], validate=True), pae(PAYLOAD_TYPE, payload)
            )
        except InvalidSignature:
            continue
        statement: dict[str, Any] = orjson.loads(payload)
        return statement
    raise ValueError("no signature verifies with the keys given")
