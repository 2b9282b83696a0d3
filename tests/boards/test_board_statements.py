"""The board verifier opens a signed statement through the same signer search as a report's
(app/bundles/signature.signer_among): trusted keys first, then the bundle's; and a validly
signed payload that is not a statement is refused, not a crash."""

from __future__ import annotations

import base64
import hashlib

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from app.bundles.board_proofs import open_statement
from app.digest.signing import PAYLOAD_TYPE, STATEMENT_TYPE, pae


def _key() -> tuple[Ed25519PrivateKey, str, bytes]:
    private = Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return private, "sha256:" + hashlib.sha256(raw).hexdigest(), raw


def _envelope(payload: bytes, *signers: tuple[Ed25519PrivateKey, str]) -> dict[str, object]:
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [
            {"keyid": keyid, "sig": base64.b64encode(key.sign(pae(PAYLOAD_TYPE, payload))).decode()}
            for key, keyid in signers
        ],
    }


def test_a_trusted_signer_is_found_before_a_carried_one() -> None:
    (a, a_id, a_raw), (b, b_id, b_raw) = _key(), _key()
    statement = {"_type": STATEMENT_TYPE, "predicate": {}}
    envelope = _envelope(orjson.dumps(statement), (a, a_id), (b, b_id))
    assert open_statement(envelope, {a_id: a_raw}, {b_id: b_raw}) == (statement, b_id, True)
    assert open_statement(envelope, {a_id: a_raw}, {}) == (statement, a_id, False)
    assert open_statement(envelope, {}, {}) is None


def test_a_signed_payload_that_is_no_statement_is_refused() -> None:
    key, keyid, raw = _key()
    for payload in (b"not json", b"[1]", orjson.dumps({"_type": "other"})):
        assert open_statement(_envelope(payload, (key, keyid)), {keyid: raw}, {}) is None
