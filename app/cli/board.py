"""`evalbook board create|show`: rank the current gate reports of a suite version on one check
(docs/boards.md), or show a board, as a table with rank intervals or as the board's JSON. A
board is not a gate: the command exits 0 whenever the service answers."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import TYPE_CHECKING, Any

from app.cli.registry import Client, Command, Group
from app.domain import exits

if TYPE_CHECKING:  # httpx is imported when the command runs, not when the parser is built
    from app.cli.client import EvalBookClient


def table(board: dict[str, Any]) -> str:
    """A board as plain text: what it ranks, each subject's rank interval, and the ties."""
    body = board["body"]
    suite = body["suite_ref"]
    top = set(body["top_group"])
    out = [
        f"board {board['board_id']}: {body['check_id']} on {suite['name']} v{suite['version']} "
        f"({body['methods']['pairwise']}, Holm at alpha {body['alpha']}, {len(body['pairs'])} "
        "pairs)",
        "",
        f"{'rank':>4}  {'interval':>8}  {'score':>8}  {'top':>3}  subject",
    ]
    for entry in body["subjects"]:
        lo, hi = entry["rank_interval"]
        score = "—" if entry["score"] is None else format(entry["score"], ".4g")
        mark = "*" if entry["subject"] in top else ""
        out.append(
            f"{entry['rank']:>4}  {f'{lo}-{hi}':>8}  {score:>8}  {mark:>3}  {entry['subject']}"
        )
    for entry in body["excluded"]:
        out.append(f"{'':>4}  {'':>8}  {'—':>8}  {'':>3}  {entry['subject']} ({entry['reason']})")
    out += [
        "",
        f"{len(top)} of {len(body['subjects'])} tied at the top (not significantly worse than "
        "the first)",
        f"digest {board['digest']}",
    ]
    return "\n".join(out) + "\n"


def _answer(client: EvalBookClient, args: argparse.Namespace) -> dict[str, Any]:
    if args.action == "show":
        found: dict[str, Any] = client.request("GET", f"/evaluations/api/boards/{args.board_id}")
        return found
    asked = {
        "suite": args.suite,
        "version": args.version,
        "check_id": args.check,
        "subjects": args.subject or None,
        "alpha": args.alpha,
    }
    made: dict[str, Any] = client.request("POST", "/evaluations/api/boards", json=asked)
    return made


def cmd_board(args: argparse.Namespace) -> int:
    """Make or show a board and print it (exit 0), or exit as app.domain.exits says (64 a wrong
    command line, 66 an unknown board or suite version, 2 a board the service refused, 77 a
    refused token, 4 no answer)."""
    from app.cli.client import ClientError, EvalBookClient

    name = f"evalbook board {args.action}"
    if args.action == "show":
        try:
            uuid.UUID(args.board_id)
        except ValueError:
            print(f"{name}: {args.board_id!r} is not a board id", file=sys.stderr)
            return exits.USAGE
    try:
        client = EvalBookClient.from_environment(args.url, args.token)
        board = _answer(client, args)
    except ClientError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return exits.for_status(exc.status)
    if args.json:
        print(json.dumps(board, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(table(board))
    return exits.OK


def _create_options(create: argparse.ArgumentParser) -> None:
    create.add_argument("--suite", required=True, help="the suite's name")
    create.add_argument("--version", required=True, help="the suite version")
    create.add_argument("--check", required=True, help="the check to rank on")
    create.add_argument(
        "--subject",
        action="append",
        metavar="DIGEST",
        help="a subject to rank (repeat; default: every subject with a current gate report)",
    )
    create.add_argument(
        "--alpha", type=float, default=0.05, help="family-wise error rate (default 0.05)"
    )


def _show_options(show: argparse.ArgumentParser) -> None:
    show.add_argument("board_id", help="the board's id")


PRINTS = "print the board's JSON"
COMMANDS: list[Command | Group] = [
    Group(
        ("board",),
        "rank subjects' current reports with rank intervals (exit 0: a board is not a gate)",
    ),
    Command(
        ("board", "create"),
        "rank the current gate reports of a suite version on one check",
        cmd_board,
        _create_options,
        epilog="exits 0 when the board is made; 2 when the service refuses it",
        client=Client("board.write and report.read", json=PRINTS),
    ),
    Command(
        ("board", "show"),
        "a board, by id",
        cmd_board,
        _show_options,
        client=Client("report.read", json=PRINTS),
    ),
]
