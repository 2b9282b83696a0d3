"""What a bundle's status rests on in the log (docs/bundles.md): every supersession statement it
carries has its logged entry, proven included in the newest checkpoint the bundle carries, and
every logged supersession it carries has its statement. A report that says current is current
only as far as a bundle can say: the log cannot prove an absence from a bundle, so that stays
not proven offline; `--log URL` scans the served entries after the report's up to that
checkpoint and proves it (or finds the supersession the bundle leaves out)."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import orjson
import rfc8785

from app.bundles.log_check import canonical_digest
from app.bundles.log_scan import ScanError, entries_after
from app.bundles.results import Finding, NotProven, Proven, failure
from app.digest.merkle import leaf_hash, verify_inclusion
from app.tlog.tiles import TileError

if TYPE_CHECKING:
    from app.bundles.facts import Facts
    from app.bundles.log_check import LogPolicy

CURRENT = "current when exported"
UNPROVEN_CURRENT = (
    "status: current when exported is not proven offline (a bundle cannot show that no "
    "supersession was logged after it; --log URL scans the log)"
)


def _digest_named(entry: dict[str, Any]) -> str | None:
    named = entry.get("statement_digest")
    return named if type(named) is str else None


def _same(a: Any, b: Any) -> bool:
    """Equal as canonical JSON (so 1 and true differ, as they do to the Node verifier)."""
    try:
        return bool(rfc8785.dumps(a) == rfc8785.dumps(b))
    except (rfc8785.CanonicalizationError, ValueError, TypeError):
        return False


def _entry_problem(entry: dict[str, Any], predicate: dict[str, Any]) -> str | None:
    if entry.get("kind") != "supersession":
        return "a supersession's log entry is of another kind"
    for name in ("superseded_report_id", "successor_report_id", "at"):
        if not _same(entry.get(name), predicate.get(name)):
            return f"a supersession's log entry names another {name}"
    return None


def _included(item: dict[str, Any], tree: tuple[int, bytes]) -> bool:
    try:
        proof = [base64.b64decode(p, validate=True) for p in item["inclusion_proof"]]
    except ValueError:
        return False
    if any(len(p) != 32 for p in proof):
        return False
    leaf = leaf_hash(rfc8785.dumps(item["entry"]))
    return verify_inclusion(leaf, item["index"], tree[0], proof, tree[1])


def _supersession_proven(
    facts: Facts,
    policy: LogPolicy,
    item: dict[str, Any],
    predicate: Any,
    tree: tuple[int, bytes],
) -> Finding:
    """What one supersession's logged entry proves: its statement, after the report's entry,
    in the bundle's tree."""
    line_no = facts.report_line
    problem = _entry_problem(item["entry"], predicate)
    if problem is None and item["index"] <= facts.log["index"]:
        problem = "a supersession is logged before the report it names"
    if problem is not None:
        return failure(line_no, "log", problem)
    if item["inclusion_proof"] is None:
        not_yet = "a supersession's entry was not yet in a checkpoint"
        return failure(line_no, "log", not_yet) if policy.demanded else NotProven(f"log: {not_yet}")
    if not _included(item, tree):
        return failure(line_no, "log", "a supersession's inclusion proof does not lead to the root")
    return Proven("supersession_log")


def settle_status_log(
    facts: Facts, policy: LogPolicy, status: str | None
) -> Generator[Finding, None, str | None]:
    """Prove each supersession statement's logged entry; with `--log`, that the report was not
    superseded up to the bundle's newest checkpoint. The status, proven further when it is."""
    line_no, tree = facts.report_line, facts.log_tree
    if tree is None or type(facts.log) is not dict:
        return status
    logged = {_digest_named(item["entry"]): item for item in facts.log.get("supersessions") or []}
    for envelope, predicate in facts.signed_statements:
        item = logged.pop(canonical_digest(envelope), None)
        if item is None:
            yield failure(line_no, "log", "a supersession statement has no entry in the log")
            continue
        yield _supersession_proven(facts, policy, item, predicate, tree)
    # A statement carried but not proven (an untrusted key, say) is reported as such already.
    for envelope in facts.supersessions if type(facts.supersessions) is list else []:
        with contextlib.suppress(rfc8785.CanonicalizationError, ValueError, TypeError):
            logged.pop(canonical_digest(envelope), None)
    if logged:
        yield failure(line_no, "log", "a logged supersession the bundle carries no statement of")
    if policy.scan_url is not None:
        return (yield from _scan(facts, policy.scan_url, tree, status))
    if status == CURRENT:
        yield NotProven(UNPROVEN_CURRENT)
    return status


def _scan(
    facts: Facts, url: str, tree: tuple[int, bytes], status: str | None
) -> Generator[Finding, None, str | None]:
    """The served entries after the report's: a supersession of it the bundle leaves out is a
    failure; none proves a current report current up to the tree."""
    line_no, report_id = facts.report_line, facts.body.get("report_id")
    try:
        later = entries_after(url, tree, facts.log["index"])
    except (ScanError, TileError) as exc:
        yield failure(line_no, "log", f"--log {url}: {exc}")
        return status
    for index, data in later:
        try:
            entry = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if (
            type(entry) is dict
            and entry.get("kind") == "supersession"
            and entry.get("superseded_report_id") == report_id
            and status == CURRENT
        ):
            yield failure(
                line_no,
                "supersession",
                f"the log holds a supersession of this report (entry {index}) that the bundle "
                "leaves out",
            )
            return status
    if status == CURRENT:
        yield Proven("current")
        return f"{CURRENT} (proven in the log up to {tree[0]} entries)"
    return status
