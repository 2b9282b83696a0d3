"""The `evalbook` command: serve, migrate, projects, tokens, bundles, the gate and the other
clients, each declared once as a `Command` (app/cli/registry.py) in the modules listed here.

This module stays light: `verify-bundle` runs without importing the web and database stack,
and every other subcommand imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app.cli import board, diff, export, gate_command, labels, log, service, verify
from app.cli.importers import cli as importing
from app.cli.registry import Command, Group, build

# Every subcommand, in the order `evalbook --help` lists them. A new command is a `Command`
# in its module's COMMANDS; a new module is one more line here.
DECLARED: list[Sequence[Command | Group]] = [
    service.SERVING,
    verify.COMMANDS,
    gate_command.COMMANDS,
    diff.COMMANDS,
    board.COMMANDS,
    labels.COMMANDS,
    export.COMMANDS,
    log.COMMANDS,
    importing.COMMANDS,
    service.OWNING,
]


def parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    return build([entry for entries in DECLARED for entry in entries])


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `evalbook` console script."""
    args = parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
