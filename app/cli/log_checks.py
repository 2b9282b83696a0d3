"""`evalbook witness` and `evalbook log verify`: an outsider's checks of a served transparency
log (docs/transparency.md). The witness proves each new checkpoint consistent with the last
one it accepted before cosigning it; the monitor recomputes the whole tree from the entry
bundles and checks every entry against the reports the API serves."""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from app.digest import merkle
from app.tlog import checkpoint as checkpoints
from app.tlog import note as notes
from app.tlog import tiles

INCONSISTENT, UNANSWERED, USAGE = 1, 4, 64


class Refused(Exception):
    """The log contradicts what an outsider holds: exit 1, naming both."""


class LogReader:
    """Reads a served log's checkpoint, tiles and entry bundles over HTTP."""

    def __init__(self, http: httpx.Client, tree_size: int) -> None:
        self.http = http
        self.size = tree_size
        self._tiles: dict[tuple[int, int], bytes] = {}

    def get(self, path: str) -> bytes:
        """A path's bytes (an HTTP error raises)."""
        answer = self.http.get(path)
        answer.raise_for_status()
        return answer.content

    def tile(self, level: int, n: int) -> bytes:
        """Tile `n` of a level (-1: entries) as this tree holds it, full or partial."""
        key = (level, n)
        if key not in self._tiles:
            held = self.size >> (tiles.HEIGHT * max(level, 0))
            width = min(tiles.WIDTH, held - n * tiles.WIDTH)
            self._tiles[key] = self.get("/log/" + tiles.Tile(level, n, width).path())
        return self._tiles[key]

    async def elements(self, level: int, start: int, count: int) -> list[bytes]:
        """Hashes [start, start + count) of a level, from its tiles."""
        out: list[bytes] = []
        for i in range(start, start + count):
            n, at = divmod(i, tiles.WIDTH)
            data = self.tile(level, n)
            out.append(data[at * tiles.HASH : (at + 1) * tiles.HASH])
        return out


def read_checkpoint(http: httpx.Client, verifier: notes.Verifier) -> tuple[bytes, str]:
    """The served checkpoint note and its text, the log's signature checked."""
    answer = http.get("/log/checkpoint")
    answer.raise_for_status()
    try:
        text = notes.verify(answer.content, verifier)
    except notes.NoteError as exc:
        raise Refused(f"the checkpoint's signature does not verify: {exc}") from None
    return answer.content, text


def log_verifier(http: httpx.Client, given: str | None) -> notes.Verifier:
    """The log's key: given, or read from the service's keys document."""
    if given:
        return notes.parse_vkey(given)
    keys = http.get("/.well-known/evalbook/keys")
    keys.raise_for_status()
    return notes.parse_vkey(keys.json()["log"]["vkey"])


def consistent(
    http: httpx.Client, old: checkpoints.Checkpoint, new: checkpoints.Checkpoint
) -> None:
    """Refused unless the tree of `new` extends the tree of `old` (RFC 9162 consistency proof
    computed from the new tree's tiles, checked against both roots)."""
    if new.size < old.size:
        raise Refused(f"the log shrank: {old.size} entries before, {new.size} now")
    if new.size == old.size:
        if new.root != old.root:
            raise Refused(f"two roots for {new.size} entries")
        return
    if old.size == 0:
        return
    reader = LogReader(http, new.size)
    proof = asyncio.run(tiles.consistency_proof(reader.elements, old.size, new.size))
    if merkle.root_from_consistency(old.size, old.root, new.size, proof) != new.root:
        raise Refused(f"no consistency proof leads from {old.size} entries to {new.size}")


def _describe(cp: checkpoints.Checkpoint) -> str:
    return f"size {cp.size}, root {base64.b64encode(cp.root).decode()}"


def witness(args: argparse.Namespace) -> int:
    """Check the newest checkpoint against the last one accepted; cosign and post it."""
    from app.digest.signing import load_private_key

    key = load_private_key(Path(args.key))
    if args.print_vkey:
        public = notes.raw(key.public_key())
        print(notes.Verifier(args.name, public, notes.COSIGNATURE_V1).vkey())
        return 0
    if not args.log or not args.state:
        print("evalbook witness: --log and --state are required", file=sys.stderr)
        return USAGE
    state_path = Path(args.state)
    state: dict[str, Any] = json.loads(state_path.read_text()) if state_path.exists() else {}
    with httpx.Client(base_url=args.log.rstrip("/"), timeout=60) as http:
        try:
            given = args.log_key[-1] if args.log_key else None
            verifier = log_verifier(http, given or state.get("log_vkey"))
            signed, text = read_checkpoint(http, verifier)
            new = checkpoints.parse(text)
            if "note" in state:
                old = checkpoints.parse(state["note"])
                try:
                    consistent(http, old, new)
                except Refused as exc:
                    print(
                        f"evalbook witness: refused: {exc}\n  accepted: {_describe(old)}\n"
                        f"  served:   {_describe(new)}",
                        file=sys.stderr,
                    )
                    return INCONSISTENT
            cosignature = notes.cosign(text, args.name, key, int(time.time()))
            posted = http.post(
                "/log/cosignatures",
                json={"note": notes.signed_note(text, [cosignature]).decode()},
            )
        except Refused as exc:
            print(f"evalbook witness: refused: {exc}", file=sys.stderr)
            return INCONSISTENT
        except (httpx.HTTPError, checkpoints.CheckpointError, notes.NoteError) as exc:
            print(f"evalbook witness: the log did not answer: {exc}", file=sys.stderr)
            return UNANSWERED
    state = {"log_vkey": verifier.vkey(), "note": text, "signed": signed.decode()}
    temporary = state_path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state, indent=2))
    os.replace(temporary, state_path)
    if posted.status_code != 200:
        print(f"evalbook witness: cosigned {_describe(new)}; the log kept it not: {posted.text}")
        return UNANSWERED
    print(f"evalbook witness: cosigned {_describe(new)}")
    return 0


def recompute(http: httpx.Client, cp: checkpoints.Checkpoint) -> tuple[list[bytes], list[str]]:
    """Every entry, and what disagrees between the entry bundles, the hash tiles and the
    checkpoint's root."""
    reader = LogReader(http, cp.size)
    problems: list[str] = []
    entries: list[bytes] = []
    for n in range(-(-cp.size // tiles.WIDTH)):
        entries += tiles.split_bundle(reader.tile(-1, n))
    if len(entries) != cp.size:
        return entries, [f"the entry bundles hold {len(entries)} entries, the checkpoint {cp.size}"]
    level = [merkle.leaf_hash(e) for e in entries]
    height = 0
    while level:
        for n in range(-(-len(level) // tiles.WIDTH)):
            ours = b"".join(level[n * tiles.WIDTH : (n + 1) * tiles.WIDTH])
            if reader.tile(height, n) != ours:
                problems.append(f"hash tile {height}/{n} differs from the entries")
        level = [
            tiles.root_of(level[i : i + tiles.WIDTH])
            for i in range(0, len(level) - tiles.WIDTH + 1, tiles.WIDTH)
        ]
        height += 1
    compact = tiles.CompactRange()
    for entry in entries:
        compact.append(merkle.leaf_hash(entry))
    if compact.root() != cp.root:
        problems.append("the entries' tree root differs from the checkpoint's")
    return entries, problems


def _api_problems(
    http: httpx.Client, entries: list[bytes], skip_unseen: bool = False
) -> tuple[list[str], int]:
    """Each entry against the reports the API serves (the token's project), then each served
    report and superseded envelope against the entries; (problems, entries seen)."""
    problems: list[str] = []
    logged: dict[str, int] = {}
    superseded: dict[str, tuple[int, dict[str, Any]]] = {}
    seen = 0
    for index, raw in enumerate(entries):
        entry = json.loads(raw)
        if entry["kind"] == "supersession":
            superseded[entry["superseded_report_id"]] = (index, entry)
            continue
        if entry["kind"] == "board":
            found, checked = _board_problems(http, index, entry, skip_unseen)
            problems += found
            seen += checked
            continue
        logged[entry["report_id"]] = index
        answer = http.get(f"/evaluations/api/reports/{entry['report_id']}")
        if answer.status_code == 404:
            # A logged report the service no longer serves is a finding; for a token of one
            # project on a shared service, another project's answer 404 too (--skip-unseen).
            if not skip_unseen:
                problems.append(
                    f"entry {index}: report {entry['report_id']} is logged but answers 404 "
                    "(gone, or another project's: --skip-unseen for a token of one project)"
                )
            continue
        answer.raise_for_status()
        seen += 1
        served = answer.json()
        if served["digest"] != entry["report_digest"]:
            problems.append(
                f"entry {index}: report {entry['report_id']} is served with digest "
                f"{served['digest']}, the log says {entry['report_digest']}"
            )
        attestation = http.get(f"/evaluations/api/reports/{entry['report_id']}/attestation")
        if attestation.status_code == 200:
            digest = "sha256:" + hashlib.sha256(attestation.content).hexdigest()
            if digest != entry["attestation_digest"]:
                problems.append(
                    f"entry {index}: report {entry['report_id']}'s attestation is "
                    f"{digest}, the log says {entry['attestation_digest']}"
                )
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"view": "summary", "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = http.get("/evaluations/api/reports", params=params)
        page.raise_for_status()
        listed = page.json()
        for report in listed["reports"]:
            problems += _report_problems(report, logged, superseded)
        cursor = listed.get("next_cursor")
        if not cursor:
            break
    return problems, seen


def _board_problems(
    http: httpx.Client, index: int, entry: dict[str, Any], skip_unseen: bool
) -> tuple[list[str], int]:
    """A board's entry against the board and signed statement the API serves; (problems,
    boards checked)."""
    board_id = entry["board_id"]
    answer = http.get(f"/evaluations/api/boards/{board_id}")
    if answer.status_code == 404:
        if skip_unseen:
            return [], 0
        return [f"entry {index}: board {board_id} is logged but answers 404"], 0
    answer.raise_for_status()
    problems = []
    served = answer.json()
    for field in ("digest", "attestation_digest"):
        logged = entry["board_digest" if field == "digest" else field]
        if served[field] != logged:
            problems.append(
                f"entry {index}: board {board_id} is served with {field} {served[field]}, "
                f"the log says {logged}"
            )
    statement = http.get(f"/evaluations/api/boards/{board_id}/attestation")
    statement.raise_for_status()
    digest = "sha256:" + hashlib.sha256(statement.content).hexdigest()
    if digest != entry["attestation_digest"]:
        problems.append(
            f"entry {index}: board {board_id}'s attestation is {digest}, the log says "
            f"{entry['attestation_digest']}"
        )
    return problems, 1


def _report_problems(
    report: dict[str, Any],
    logged: dict[str, int],
    superseded: dict[str, tuple[int, dict[str, Any]]],
) -> list[str]:
    report_id, envelope = report["report_id"], report["envelope"]
    if report_id not in logged:
        return [f"report {report_id} is served but has no entry in the log"]
    entry = superseded.get(report_id)
    if envelope["status"] == "current" and entry is not None:
        return [
            f"entry {entry[0]}: report {report_id} was superseded by "
            f"{entry[1]['successor_report_id']}, but is served as current"
        ]
    if envelope["status"] == "superseded":
        if entry is None:
            return [f"report {report_id} is served as superseded, but the log never said so"]
        if entry[1]["successor_report_id"] != envelope.get("superseded_by"):
            return [
                f"entry {entry[0]}: report {report_id} was superseded by "
                f"{entry[1]['successor_report_id']}, the envelope says "
                f"{envelope.get('superseded_by')}"
            ]
    return []


def _cosignature_problems(signed: bytes, text: str, args: argparse.Namespace) -> list[str]:
    """The served checkpoint's valid cosignatures by the given witnesses, against the minimum."""
    witnesses = [notes.parse_vkey(k) for k in args.witness_key or []]
    _, signatures = notes.split(signed)
    valid = sum(any(notes.verify_cosignature(text, s, w) for s in signatures) for w in witnesses)
    if valid < args.min_witnesses:
        return [
            f"the checkpoint carries {valid} valid cosignature(s) by the given witnesses; "
            f"--min-witnesses {args.min_witnesses}"
        ]
    return []


def verify_log(args: argparse.Namespace) -> int:
    """Recompute the log from its tiles, prove it extends the checkpoint kept last time (with
    --state), count the witnesses' cosignatures; with a token, check every entry against the
    API (after a tile problem too: the entries the bundles hold are still checked)."""
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    state_path = Path(args.state) if args.state else None
    state: dict[str, Any] = (
        json.loads(state_path.read_text()) if state_path and state_path.exists() else {}
    )
    with httpx.Client(base_url=args.log.rstrip("/"), timeout=120, headers=headers) as http:
        try:
            verifier = log_verifier(http, args.log_key or state.get("log_vkey"))
            signed, text = read_checkpoint(http, verifier)
            cp = checkpoints.parse(text)
            if "note" in state:
                consistent(http, checkpoints.parse(state["note"]), cp)
            entries, problems = recompute(http, cp)
            problems += _cosignature_problems(signed, text, args)
            seen = 0
            if args.token:
                api, seen = _api_problems(http, entries, args.skip_unseen)
                problems += api
        except Refused as exc:
            print(f"evalbook log verify: {exc}")
            return INCONSISTENT
        except (httpx.HTTPError, checkpoints.CheckpointError, notes.NoteError) as exc:
            print(f"evalbook log verify: the log did not answer: {exc}", file=sys.stderr)
            return UNANSWERED
    if state_path is not None and not problems:
        kept = {"log_vkey": verifier.vkey(), "note": text, "signed": signed.decode()}
        temporary = state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(kept, indent=2))
        os.replace(temporary, state_path)
    for problem in problems:
        print(problem)
    checked = f"; {seen} reports and boards checked against the API" if args.token else ""
    print(f"log of {cp.size} entries: {len(problems)} disagreement(s){checked}")
    return INCONSISTENT if problems else 0
