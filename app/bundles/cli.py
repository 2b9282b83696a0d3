"""`evalbook verify-bundle FILE [--replay] [--json]`: exit 0 proven, 1 failed, 2 not a bundle,
64 a bad key, 66 no such file (app.domain.exits)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from app.bundles.board_format import is_board_bundle
from app.bundles.log_check import LogPolicy
from app.bundles.results import NotABundle, Outcome, failure_documents
from app.bundles.signature import KeyError_, keyid, parse_key, parse_keys_document
from app.bundles.verify import verify_file
from app.domain import exits
from app.tlog.note import NoteError, parse_vkey

if TYPE_CHECKING:  # numpy and scipy are imported only when a board bundle is verified
    from app.bundles.board_verify import BoardOutcome


def _report(outcome: Outcome, as_json: bool) -> None:
    if as_json:
        document = {
            "ok": outcome.ok,
            "lines": outcome.lines,
            "failures": failure_documents(outcome.failures),
            "proven": dict(sorted(outcome.proven.items())),
            "not_proven": dict(sorted(outcome.not_proven.items())),
            "replay": outcome.replay,
            "report_id": outcome.report_id,
            "report_digest": outcome.report_digest,
            "signer": outcome.signer,
            "status": outcome.status,
            "log": outcome.log,
            "unavailable": _items(outcome, "unavailable: "),
            "redacted": _items(outcome, "redacted: "),
        }
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    for failure in outcome.failures:
        print(f"FAIL {failure}")
    # The replay is told on a line of its own: the count is of what both verifiers prove.
    proven = sum(n for what, n in outcome.proven.items() if what != "replay")
    print(f"report {outcome.report_id} {outcome.report_digest}")
    print(f"signer: {_signer(outcome)}")
    print(f"status: {outcome.status}")
    print(f"log: {_log(outcome)}")
    print(
        f"{outcome.lines} lines; {proven} checks proven; "
        f"{_items(outcome, 'unavailable: ')} unavailable, {_items(outcome, 'redacted: ')} redacted"
    )
    for what, count in sorted(outcome.not_proven.items()):
        print(f"not proven: {what}: {count}")
    print(f"replay: {outcome.replay}")
    print(
        "OK: everything provable was proven" if outcome.ok else f"FAILED: {len(outcome.failures)}"
    )


def _report_board(outcome: BoardOutcome, as_json: bool) -> None:
    """A board bundle's outcome: its JSON document, or lines for people."""
    if as_json:
        sys.stdout.write(
            orjson.dumps(outcome.document(), option=orjson.OPT_INDENT_2).decode() + "\n"
        )
        return
    for failure in outcome.failures:
        print(f"FAIL {failure}")
    signer = outcome.signer
    print(f"board {outcome.board_id} {outcome.board_digest}")
    untrusted = "NOT trusted: no --key or --keys names it"
    said = "not proven" if signer is None else str(signer["keyid"])
    if signer is not None:
        said += f" ({'trusted' if signer['trusted'] else untrusted})"
    print(f"signer: {said}")
    log = outcome.log
    print(
        "log: " + ("not proven" if log is None else f"entry {log['index']} of {log['tree_size']}")
    )
    print(f"{outcome.lines} lines; {sum(outcome.proven.values())} checks proven")
    for what, count in sorted(outcome.not_proven.items()):
        print(f"not proven: {what}: {count}")
    print(
        "OK: everything provable was proven" if outcome.ok else f"FAILED: {len(outcome.failures)}"
    )


def _items(outcome: Outcome, prefix: str) -> int:
    return sum(n for what, n in outcome.not_proven.items() if what.startswith(prefix))


def _signer(outcome: Outcome) -> str:
    if outcome.signer is None:
        return "not proven"
    trusted = "trusted" if outcome.signer["trusted"] else "NOT trusted: no --key or --keys names it"
    return f"{outcome.signer['keyid']} ({trusted})"


def _log(outcome: Outcome) -> str:
    found = outcome.log
    if found is None:
        return "not proven"
    trusted = "trusted" if found["trusted"] else "NOT trusted: no --log-key names it"
    return (
        f"entry {found['index']} of {found['tree_size']} (checkpoint {trusted}; "
        f"{found['witnesses']} witness cosignature(s))"
    )


def _log_policy(args: argparse.Namespace) -> LogPolicy:
    return LogPolicy(
        log_key=parse_vkey(args.log_key) if args.log_key else None,
        witness_keys=[parse_vkey(k) for k in args.witness_key or []],
        min_witnesses=args.min_witnesses,
        scan_url=args.log,
    )


def _trusted_keys(args: argparse.Namespace) -> dict[str, bytes]:
    keys: dict[str, bytes] = {}
    for text in args.key or []:
        raw = parse_key(text)
        keys[keyid(raw)] = raw
    for name in args.keys or []:
        keys.update(parse_keys_document(Path(name)))
    return keys


def cmd_verify_bundle(args: argparse.Namespace) -> int:
    """Verify a bundle file; a progress bar on a terminal."""
    path = Path(args.file)
    if not path.is_file():
        print(f"evalbook: no such file: {path}", file=sys.stderr)
        return exits.NOT_FOUND
    try:
        trusted = _trusted_keys(args)
        policy = _log_policy(args)
    except (KeyError_, OSError, NoteError) as exc:
        print(f"evalbook: bad key: {exc}", file=sys.stderr)
        return exits.USAGE
    if is_board_bundle(path):
        from app.bundles.board_verify import verify_board_file

        board = verify_board_file(path, trusted, args.require_trust, policy)
        _report_board(board, args.json)
        return exits.OK if board.ok else exits.FAILED
    bar = None
    if sys.stderr.isatty() and not args.json:
        from tqdm import tqdm

        bar = tqdm(total=os.path.getsize(path), unit="B", unit_scale=True, desc="verifying")
    try:
        outcome = verify_file(
            path,
            replay=args.replay,
            progress=None if bar is None else bar.update,
            trusted_keys=trusted,
            require_trust=args.require_trust,
            log_policy=policy,
        )
    except NotABundle as exc:
        print(f"evalbook: not a bundle: {exc}", file=sys.stderr)
        return exits.REFUSED
    finally:
        if bar is not None:
            bar.close()
    _report(outcome, args.json)
    return exits.OK if outcome.ok else exits.FAILED


EPILOG = (
    "exits 0 when everything provable was proven, 1 when a check fails, 2 when the "
    "file is not a bundle, 64 for a bad key or option, 66 when the file does not exist"
)


def add_arguments(verify: argparse.ArgumentParser) -> None:
    """The options of `evalbook verify-bundle` (declared in app/cli/verify.py)."""
    verify.add_argument("file")
    verify.add_argument("--replay", action="store_true", help="re-run the aggregation and compare")
    verify.add_argument("--json", action="store_true", help="a JSON report on stdout")
    verify.add_argument(
        "--key",
        action="append",
        metavar="PEM_OR_BASE64",
        help="a trusted public key: a PEM file, PEM text, or base64 of its 32 bytes (repeatable)",
    )
    verify.add_argument(
        "--keys",
        action="append",
        metavar="FILE",
        help="trusted keys: a saved copy of the service's /.well-known/evalbook/keys",
    )
    verify.add_argument(
        "--require-trust",
        action="store_true",
        help="fail unless the report is signed by a trusted key",
    )
    verify.add_argument(
        "--log-key",
        metavar="VKEY",
        help="the transparency log's verifier key (the keys document's log.vkey): the report "
        "must be in a checkpoint it signed",
    )
    verify.add_argument(
        "--witness-key",
        action="append",
        metavar="VKEY",
        help="a witness's verifier key (cosignature/v1), repeatable",
    )
    verify.add_argument(
        "--min-witnesses",
        type=int,
        default=0,
        metavar="N",
        help="fail unless N of the given witnesses cosigned the report's checkpoint",
    )
    verify.add_argument(
        "--log",
        metavar="URL",
        help="the served log (e.g. https://host/log): prove a current report was not "
        "superseded up to the bundle's newest checkpoint, from the entries after its own",
    )
