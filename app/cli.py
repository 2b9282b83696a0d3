"""The `evalbook` command: serve, migrate, projects, tokens, bundles, retention.

This module stays light: `verify-bundle` runs without importing the web and database stack,
and every other subcommand imports `app.commands` when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, Protocol

from app.bundles.cli import add_parser as add_verify_parser


class ProblemErrorLike(Protocol):
    """What the command line reads of an `app.errors.ProblemError` (imported lazily)."""

    detail: str
    errors: list[dict[str, Any]] | None


def _service(name: str) -> Callable[[argparse.Namespace], int]:
    """A handler that runs `app.commands.<name>` with settings from the environment."""

    def run(args: argparse.Namespace) -> int:
        from app import commands
        from app.config import Settings
        from app.errors import ProblemError

        try:
            code: int = getattr(commands, name)(args, Settings())
            return code
        except ProblemError as exc:
            print(f"evalbook: {option_message(exc)}", file=sys.stderr)
            return 2
        except ValueError as exc:
            print(f"evalbook: {exc}", file=sys.stderr)
            return 2

    return run


def option_message(error: ProblemErrorLike) -> str:
    """An error as the command line says it: a refused body field is named by its option."""
    errors = error.errors or []
    loc = errors[0]["loc"] if errors else []
    if len(loc) >= 2 and loc[0] == "body":
        return f"--{str(loc[1]).replace('_', '-')}: {errors[0]['msg']}"
    return error.detail


def _gate(args: argparse.Namespace) -> int:
    from app.gate import cmd_gate  # on demand: the other commands start without httpx, numpy

    return cmd_gate(args)


def _import(args: argparse.Namespace) -> int:
    from app.importers.run import cmd_import

    return cmd_import(args)


def parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    root = argparse.ArgumentParser(prog="evalbook", description="EvalBook Reports")
    commands = root.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="migrate and serve the API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="service processes")
    serve.set_defaults(handler=_service("cmd_serve"))
    commands.add_parser("migrate", help="apply pending migrations").set_defaults(
        handler=_service("cmd_migrate")
    )
    project = commands.add_parser("project", help="projects").add_subparsers(
        dest="action", required=True
    )
    project_create = project.add_parser("create", help="create ORG/PROJECT")
    project_create.add_argument("path")
    project_create.set_defaults(handler=_service("cmd_project_create"))
    token = commands.add_parser("token", help="tokens").add_subparsers(dest="action", required=True)
    token_create = token.add_parser("create", help="create a token")
    token_create.add_argument("--project", required=True)
    token_create.add_argument("--name", required=True)
    token_create.add_argument("--permissions", required=True)
    token_create.add_argument("--kind", default="user", choices=["user", "runner", "peer"])
    token_create.add_argument("--assurance", default=None)
    token_create.set_defaults(handler=_service("cmd_token_create"))
    add_verify_parser(commands)
    gate = commands.add_parser("gate", help="exit with what the current reports say")
    gate.add_argument("--subject", required=True, help="the subject digest, e.g. sha1:4f1c…")
    gate.add_argument("--suite", action="append", default=[], help="a suite that must pass")
    gate.add_argument("--require-assurance", default=None, metavar="LEVEL")
    gate.add_argument("--wait", type=float, default=0, metavar="SECONDS")
    gate.add_argument("--junit", metavar="FILE")
    gate.add_argument("--summary", metavar="FILE", help="Markdown")
    gate.add_argument("--url", help="the service (EVALBOOK_URL)")
    gate.add_argument("--token", help="a token with report.read (EVALBOOK_TOKEN)")
    gate.set_defaults(handler=_gate)
    from app.importers.cli import add_parser as add_import_parser

    add_import_parser(commands, _import)
    keys = commands.add_parser("keys", help="report signing keys").add_subparsers(
        dest="action", required=True
    )
    keys.add_parser("list", help="every key, active and retired").set_defaults(
        handler=_service("cmd_keys")
    )
    keys.add_parser("rotate", help="a new active key; the old one keeps verifying").set_defaults(
        handler=_service("cmd_keys")
    )
    retention = commands.add_parser("retention", help="the retention policy").add_subparsers(
        dest="action", required=True
    )
    retention_apply = retention.add_parser(
        "apply", help="remove example bodies and case outputs, keeping their digests"
    )
    retention_apply.add_argument("--older-than", type=float, required=True, metavar="DAYS")
    retention_apply.set_defaults(handler=_service("cmd_retention_apply"))
    return root


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `evalbook` console script."""
    args = parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
