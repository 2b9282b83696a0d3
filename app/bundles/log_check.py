"""The report's place in the transparency log, as a bundle carries it (docs/transparency.md):
the checkpoint's signature (the given log key, or the bundle's own, reported as not trusted),
the entry naming this report's digest and attestation, the RFC 9162 inclusion proof, and the
witnesses' cosignatures (`--witness-key`, `--min-witnesses`)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import rfc8785

from app.bundles.results import Finding, NotProven, Proven, failure
from app.digest.merkle import leaf_hash, root_from_consistency, verify_inclusion
from app.tlog import checkpoint as checkpoints
from app.tlog import note as notes

if TYPE_CHECKING:
    from app.bundles.facts import Facts

NO_LOG = "log: no transparency log entry (issued before the log)"
NOT_COVERED = "log: no checkpoint covered the entry when exported"
LOG_FIELDS = frozenset(
    {"entry", "index", "checkpoint", "inclusion_proof", "key", "newest", "supersessions"}
)


@dataclass(frozen=True)
class LogPolicy:
    """What the command line asks of the log: a trusted log key, witness keys, a minimum."""

    log_key: notes.Verifier | None = None
    witness_keys: list[notes.Verifier] = field(default_factory=list)
    min_witnesses: int = 0
    # `--log URL`: scan the served log after the report's entry (app/bundles/log_status.py).
    scan_url: str | None = None

    @property
    def demanded(self) -> bool:
        """Whether a missing or uncovered entry fails (a key or a witness count was asked)."""
        return self.log_key is not None or self.min_witnesses > 0


def _shape(log: Any) -> str | None:
    if type(log) is not dict or not set(log) <= LOG_FIELDS or not {"entry", "index"} <= set(log):
        return "the report line's log is {entry, index, checkpoint, inclusion_proof, key}"
    if type(log["entry"]) is not dict or type(log["index"]) is not int or log["index"] < 0:
        return "the log's entry is an object and its index a whole number"
    return (
        _covered_shape(log) or _newest_shape(log) or _supersessions_shape(log.get("supersessions"))
    )


def _covered_shape(log: dict[str, Any]) -> str | None:
    """A covered entry's checkpoint, inclusion proof and key, as text."""
    proof = log.get("inclusion_proof")
    if log.get("checkpoint") is not None and (
        type(log["checkpoint"]) is not str
        or type(proof) is not list
        or any(type(p) is not str for p in proof)
        or type(log.get("key")) is not str
    ):
        return "a covered entry carries its checkpoint, its proof and the log's key"
    return None


def _newest_shape(log: dict[str, Any]) -> str | None:
    """The newest checkpoint the export saw, with its consistency proof, beside a covered entry."""
    newest = log.get("newest")
    if newest is not None and (
        type(newest) is not dict
        or set(newest) != {"checkpoint", "consistency_proof"}
        or type(newest["checkpoint"]) is not str
        or type(newest["consistency_proof"]) is not list
        or any(type(p) is not str for p in newest["consistency_proof"])
        or log.get("checkpoint") is None
    ):
        return "the log's newest is {checkpoint, consistency_proof} beside a covered entry"
    return None


def _supersessions_shape(items: Any) -> str | None:
    """The logged supersession entries: [{entry, index, inclusion_proof}], a proof or null."""
    if items is None:
        return None
    if type(items) is not list or any(
        type(item) is not dict
        or set(item) != {"entry", "index", "inclusion_proof"}
        or type(item["entry"]) is not dict
        or type(item["index"]) is not int
        or item["index"] < 0
        or not (
            item["inclusion_proof"] is None
            or (
                type(item["inclusion_proof"]) is list
                and all(type(p) is str for p in item["inclusion_proof"])
            )
        )
        for item in items
    ):
        return "the log's supersessions are [{entry, index, inclusion_proof}]"
    return None


def canonical_digest(value: Any) -> str:
    """How log entries name what they log (an attestation, a supersession statement): sha256
    of its canonical JSON (RFC 8785)."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def _entry_problem(facts: Facts, entry: dict[str, Any]) -> str | None:
    body = facts.body if type(facts.body) is dict else {}
    if entry.get("kind") != "report" or entry.get("report_id") != body.get("report_id"):
        return "the log's entry does not name this report"
    if entry.get("report_digest") != facts.body_digest:
        return "the log's entry names another report digest"
    attested = facts.attestation
    if attested is not None and entry.get("attestation_digest") != canonical_digest(attested):
        return "the log's entry names another attestation"
    return None


def _opened(
    facts: Facts, policy: LogPolicy, log: dict[str, Any]
) -> Generator[Finding, None, tuple[str, bool] | None]:
    """The checkpoint's text and whether its signer is trusted; None after a failure."""
    line_no = facts.report_line
    note = log["checkpoint"].encode()
    if policy.log_key is not None:
        try:
            return notes.verify(note, policy.log_key), True
        except notes.NoteError:
            yield failure(
                line_no,
                "untrusted",
                f"the checkpoint is not signed by {policy.log_key.name} (given)",
            )
            return None
    try:
        return notes.verify(note, notes.parse_vkey(log["key"])), False
    except notes.NoteError as exc:
        yield failure(line_no, "log", f"the checkpoint's signature does not verify: {exc}")
        return None


def _covered_log(
    facts: Facts, policy: LogPolicy
) -> Generator[Finding, None, dict[str, Any] | None]:
    """The report's log proof when it is there, well formed and covered by a checkpoint; else
    say why not (a failure where the policy demands a proof) and return None."""
    line_no, log = facts.report_line, facts.log
    if log is None:
        if policy.demanded:
            yield failure(line_no, "log", "the report carries no transparency log entry")
        else:
            yield NotProven(NO_LOG)
        return None
    problem = _shape(log) or _entry_problem(facts, log.get("entry") or {})
    if problem is not None:
        yield failure(line_no, "log", problem)
        return None
    if log.get("checkpoint") is None:
        if policy.demanded:
            yield failure(line_no, "log", "no checkpoint covered the entry when exported")
        else:
            yield NotProven(NOT_COVERED)
        return None
    covered: dict[str, Any] = log
    return covered


def settle_log(facts: Facts, policy: LogPolicy) -> Generator[Finding, None, dict[str, Any] | None]:
    """Prove the report's entry in the log and its checkpoint (and witnesses), or say why not;
    return what the outcome tells of the entry once it is proven."""
    line_no = facts.report_line
    log = yield from _covered_log(facts, policy)
    if log is None:
        return None
    opened = yield from _opened(facts, policy, log)
    if opened is None:
        return None
    text, trusted = opened
    try:
        stated = checkpoints.parse(text)
        proof = [base64.b64decode(p, validate=True) for p in log["inclusion_proof"]]
    except (checkpoints.CheckpointError, ValueError) as exc:
        yield failure(line_no, "log", f"the checkpoint or the proof is malformed: {exc}")
        return None
    leaf = leaf_hash(rfc8785.dumps(log["entry"]))
    if not verify_inclusion(leaf, log["index"], stated.size, proof, stated.root):
        yield failure(line_no, "log", "the inclusion proof does not lead to the checkpoint's root")
        return None
    witnesses = witnesses_of(log["checkpoint"].encode(), text, policy)
    if witnesses < policy.min_witnesses:
        yield failure(
            line_no,
            "witnesses",
            f"{witnesses} valid cosignature(s) by the given witnesses; "
            f"--min-witnesses {policy.min_witnesses}",
        )
        return None
    tree = (stated.size, stated.root)
    if log.get("newest") is not None:
        problem, newest = _newest(log, policy, stated)
        if problem is not None:
            yield failure(line_no, "log", problem)
            return None
        assert newest is not None
        tree = (newest.size, newest.root)
    facts.log_tree = tree
    yield Proven("log")
    return {
        "index": log["index"],
        "tree_size": stated.size,
        "trusted": trusted,
        "witnesses": witnesses,
    }


def _newest(
    log: dict[str, Any], policy: LogPolicy, witnessed: checkpoints.Checkpoint
) -> tuple[str | None, checkpoints.Checkpoint | None]:
    """The newest checkpoint a bundle carries, or why it does not extend the witnessed one:
    signed by the same key, and a consistency proof from the witnessed tree to it."""
    newest = log["newest"]
    key = policy.log_key or notes.parse_vkey(log["key"])
    try:
        stated = checkpoints.parse(notes.verify(newest["checkpoint"].encode(), key))
        proof = [base64.b64decode(p, validate=True) for p in newest["consistency_proof"]]
    except (notes.NoteError, checkpoints.CheckpointError, ValueError) as exc:
        return f"the newest checkpoint is malformed or not the log's: {exc}", None
    if stated.origin != witnessed.origin or stated.size <= witnessed.size:
        return "the newest checkpoint is not a later one of the same log", None
    if root_from_consistency(witnessed.size, witnessed.root, stated.size, proof) != stated.root:
        return "the newest checkpoint is not consistent with the witnessed one", None
    return None, stated


def witnesses_of(note: bytes, text: str, policy: LogPolicy) -> int:
    """How many of the given witnesses validly cosigned the checkpoint."""
    _, signatures = notes.split(note)
    return sum(
        any(notes.verify_cosignature(text, s, w) for s in signatures) for w in policy.witness_keys
    )
