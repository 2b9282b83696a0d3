"""`evalbook gate`'s declaration: its options and exits (light; the gate itself, with httpx,
is imported when it runs, from app/cli/gate.py)."""

from __future__ import annotations

import argparse

from app.cli.registry import Client, Command
from app.domain.vocabulary import ASSURANCE_LEVELS

GATE_EXITS = """exit status:
  0  every named suite's current report passes
  1  one fails
  2  one is error or inconclusive, or weaker than --require-assurance
  3  one is missing (no current report)
  4  the service cannot answer (unreachable, 5xx)
  64 the command line is wrong (an option or value the gate cannot use)
  69 --verify-log: the service cannot be trusted (a signature, the log or its history
     contradicts the reports; nothing they say counts)
  77 no token, or the service refused it (unknown, revoked, or without report.read)
fail wins over missing, missing over the rest. --junit and --summary are written on every
exit but 64 from the argument parser itself."""


def _gate(args: argparse.Namespace) -> int:
    from app.cli.gate import cmd_gate  # on demand: the other commands start without httpx

    return cmd_gate(args)


def _options(gate: argparse.ArgumentParser) -> None:
    gate.add_argument("--subject", required=True, help="the subject digest, e.g. sha1:4f1c…")
    gate.add_argument(
        "--suite",
        action="append",
        default=[],
        help="a suite that must pass (repeatable; none: every suite with a current report)",
    )
    gate.add_argument(
        "--require-assurance",
        default=None,
        metavar="LEVEL",
        help=f"pass only reports at least this strong: {', '.join(ASSURANCE_LEVELS)}",
    )
    gate.add_argument(
        "--wait",
        type=float,
        default=0,
        metavar="SECONDS",
        help="ask again until every named suite has a current report, for at most this long",
    )
    gate.add_argument(
        "--verify-log",
        action="store_true",
        help="trust a report only when signed and proven in the transparency log, in a "
        "checkpoint consistent with the one kept from the last run (exit 69 otherwise)",
    )
    gate.add_argument(
        "--log-state",
        metavar="FILE",
        default=None,
        help="where --verify-log keeps the log's key and newest checkpoint "
        "(default: ~/.cache/evalbook/log-state.json)",
    )
    gate.add_argument("--log-key", metavar="VKEY", help="pin the log's verifier key")
    gate.add_argument(
        "--keys", metavar="FILE", help="trusted signing keys (default: the keys document)"
    )
    gate.add_argument(
        "--log-wait",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long --verify-log waits for a checkpoint to cover a new report",
    )
    gate.add_argument("--junit", metavar="FILE", help="write JUnit XML here")
    gate.add_argument("--summary", metavar="FILE", help="write a Markdown summary here")


COMMANDS = [
    Command(
        ("gate",),
        "exit with what the current reports say",
        _gate,
        _options,
        epilog=GATE_EXITS,
        client=Client("report.read"),
    )
]
