"""What a board bundle signs and logs, proven (docs/boards.md, "Proof"): an in-toto statement
in its DSSE envelope against the keys given and the bundle's own, and the board's entry in the
transparency log with its inclusion proof, checkpoint signature and witnesses."""

from __future__ import annotations

import base64
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import orjson
import rfc8785

from app.bundles.log_check import LogPolicy, canonical_digest, witnesses_of
from app.bundles.results import Finding, NotProven, Proven, failure
from app.bundles.signature import signer_among
from app.digest import merkle
from app.digest.signing import PAYLOAD_TYPE, STATEMENT_TYPE
from app.tlog import checkpoint as checkpoints
from app.tlog import note as notes

UNSIGNED_REPORT = "signer: a ranked report carries no attestation"
NO_LOG = "log: the board carries no transparency log entry"
NOT_COVERED = "log: no checkpoint covered the board's entry when exported"


@dataclass(frozen=True)
class Signers:
    """The keys a statement may be signed by: the bundle's own, those given, and whether one
    given is required."""

    bundle: dict[str, bytes]
    trusted: dict[str, bytes]
    require_trust: bool


def open_statement(
    envelope: Any, keys: dict[str, bytes], trusted: dict[str, bytes]
) -> tuple[dict[str, Any], str, bool] | None:
    """(statement, keyid, trusted) of an in-toto envelope whose signature verifies by a trusted
    key first, then by a key the bundle carries; None otherwise."""
    if type(envelope) is not dict or envelope.get("payloadType") != PAYLOAD_TYPE:
        return None
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
        signatures = [
            (s["keyid"], base64.b64decode(s["sig"], validate=True)) for s in envelope["signatures"]
        ]
    except (KeyError, TypeError, ValueError):
        return None
    signer = signer_among(trusted, keys, signatures, payload)
    if signer is None:
        return None
    try:
        statement = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if type(statement) is not dict or statement.get("_type") != STATEMENT_TYPE:
        return None
    return statement, *signer


def settle_statement(
    line_no: int, envelope: Any, predicate_type: str, expected: dict[str, Any], signers: Signers
) -> Generator[Finding, None, tuple[str, bool] | None]:
    """A ranked report's statement: signed (by a key given, when one is required) and over
    `expected`; (keyid, trusted) once proven. A report issued unsigned is not proven."""
    if envelope is None:
        yield NotProven(UNSIGNED_REPORT)
        return None
    opened = open_statement(envelope, signers.bundle, signers.trusted)
    if (
        opened is None
        or opened[0].get("predicateType") != predicate_type
        or opened[0].get("predicate") != expected
    ):
        what = "the signed statement does not verify or is not this one's"
        yield failure(line_no, "attestation", what)
        return None
    _, keyid, trusted = opened
    if signers.require_trust and not trusted:
        yield failure(line_no, "untrusted", f"signed by {keyid}, not by a key given")
        return None
    yield Proven("attestation")
    return keyid, trusted


def board_entry(board: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The log entry the database computes for this board (docs/boards.md, "Proof")."""
    suite = body.get("suite_ref") or {}
    return {
        "attestation_digest": canonical_digest(board.get("attestation")),
        "board_digest": board.get("digest"),
        "board_id": body.get("board_id"),
        "check_id": body.get("check_id"),
        "created_at": body.get("created_at"),
        "kind": "board",
        "suite": {k: suite.get(k) for k in ("digest", "id", "version")},
    }


def settle_board_log(
    line_no: int, board: dict[str, Any], body: dict[str, Any], policy: LogPolicy
) -> Generator[Finding, None, dict[str, object] | None]:
    """The board's entry in a signed checkpoint (and its witnesses); what the outcome tells of
    it once proven."""
    log = board.get("log")
    if log is None or log.get("checkpoint") is None:
        if policy.log_key is not None or policy.min_witnesses > 0:
            yield failure(line_no, "log", "the board's entry is not proven in a checkpoint")
        else:
            yield NotProven(NO_LOG if log is None else NOT_COVERED)
        return None
    if log.get("entry") != board_entry(board, body):
        yield failure(line_no, "log", "the log's entry does not name this board and statement")
        return None
    try:
        key = policy.log_key or notes.parse_vkey(log["key"])
        text = notes.verify(log["checkpoint"].encode(), key)
        stated = checkpoints.parse(text)
        proof = [base64.b64decode(p, validate=True) for p in log["inclusion_proof"]]
    except (notes.NoteError, checkpoints.CheckpointError, KeyError, TypeError, ValueError) as exc:
        yield failure(line_no, "log", f"the checkpoint or its proof does not verify: {exc}")
        return None
    leaf = merkle.leaf_hash(rfc8785.dumps(log["entry"]))
    index = log.get("index")
    if type(index) is not int or not merkle.verify_inclusion(
        leaf, index, stated.size, proof, stated.root
    ):
        yield failure(line_no, "log", "the inclusion proof does not lead to the checkpoint's root")
        return None
    witnesses = witnesses_of(log["checkpoint"].encode(), text, policy)
    if witnesses < policy.min_witnesses:
        what = f"{witnesses} valid cosignature(s) by the given witnesses; "
        yield failure(line_no, "witnesses", what + f"--min-witnesses {policy.min_witnesses}")
        return None
    yield Proven("log")
    trusted = policy.log_key is not None
    return {"index": index, "tree_size": stated.size, "trusted": trusted, "witnesses": witnesses}
