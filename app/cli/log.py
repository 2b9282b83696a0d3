"""The command line of the transparency log (`evalbook witness`, `evalbook log verify`); the
commands themselves (app/cli/log_checks.py, with httpx) are imported when they run."""

from __future__ import annotations

import argparse

from app.cli.registry import Command, Group


def _witness(args: argparse.Namespace) -> int:
    if args.serve:
        from app.cli.witness_server import run

        return run(args)
    from app.cli.log_checks import witness

    return witness(args)


def _verify(args: argparse.Namespace) -> int:
    from app.cli.log_checks import verify_log

    return verify_log(args)


def _witness_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log", help="the service's base URL")
    parser.add_argument("--key", required=True, help="the witness's Ed25519 key (PEM)")
    parser.add_argument("--state", help="where the last accepted checkpoint is kept (JSON)")
    parser.add_argument("--name", default="witness", help="the witness's key name")
    parser.add_argument(
        "--log-key",
        action="append",
        help="the log's verifier key (default: the keys document); with --serve, each log "
        "the witness serves (repeatable)",
    )
    parser.add_argument(
        "--print-vkey", action="store_true", help="print this witness's verifier key and exit"
    )
    parser.add_argument(
        "--serve",
        metavar="HOST:PORT",
        help="serve C2SP tlog-witness add-checkpoint here (logs push their checkpoints)",
    )
    parser.add_argument("--prefix", help="with --serve: the submission prefix (default: none)")


def _verify_options(verify: argparse.ArgumentParser) -> None:
    verify.add_argument("--log", required=True, help="the service's base URL")
    verify.add_argument("--log-key", help="the log's verifier key (default: the keys document)")
    verify.add_argument(
        "--token", help="a report.read token: check each entry against the served reports"
    )
    verify.add_argument(
        "--state", help="the last checkpoint verified (JSON): the next must extend it"
    )
    verify.add_argument(
        "--witness-key", action="append", help="a witness's verifier key (repeatable)"
    )
    verify.add_argument(
        "--min-witnesses", type=int, default=0, help="cosignatures the checkpoint must carry"
    )
    verify.add_argument(
        "--skip-unseen",
        action="store_true",
        help="a logged report answering 404 is not a finding (a token of one project)",
    )


COMMANDS: list[Command | Group] = [
    Command(
        ("witness",),
        "check a log's newest checkpoint against the last one accepted, and cosign it "
        "(or, with --serve, answer logs' add-checkpoint requests)",
        _witness,
        _witness_options,
        epilog="exits 0 when cosigned, 1 when the log rewrote its history, 4 when unanswered",
    ),
    Group(("log",), "the transparency log"),
    Command(
        ("log", "verify"),
        "recompute the log from its tiles and check its entries against the reports",
        _verify,
        _verify_options,
        epilog="exits 0 when all agree, 1 naming each disagreement, 4 when unanswered",
    ),
]
