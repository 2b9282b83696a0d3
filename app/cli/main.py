"""The `evalbook` command: serve, migrate, projects, tokens, bundles, retention.

This module stays light: `verify-bundle` runs without importing the web and database stack,
and every other subcommand imports `app.cli.commands` when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

from app.bundles.cli import add_parser as add_verify_parser
from app.domain import exits
from app.domain.vocabulary import ASSURANCE_LEVELS
from app.identity.permissions import PERMISSIONS

USAGE_ERROR = exits.USAGE
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


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Each option's default after its help (unless it has none, is required or its help says
    it); descriptions and epilogs as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if action.required or default is None or default is False or default == []:
            return text
        if default is argparse.SUPPRESS:
            return text
        return text if "default" in text else super()._get_help_string(action) or text


class CommandParser(argparse.ArgumentParser):
    """Every option's default in its help; a usage error exits 64, not argparse's 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print the usage and the fault, exit 64."""
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


class ProblemErrorLike(Protocol):
    """What the command line reads of an `app.domain.errors.ProblemError` (imported lazily)."""

    status: int
    detail: str
    errors: list[dict[str, Any]] | None


def _service(name: str) -> Callable[[argparse.Namespace], int]:
    """A handler that runs `app.cli.commands.<name>` with settings from the environment."""

    def run(args: argparse.Namespace) -> int:
        from app.cli import commands
        from app.domain.errors import ProblemError
        from app.platform.config import Settings

        try:
            code: int = getattr(commands, name)(args, Settings())
            return code
        except ProblemError as exc:
            print(f"evalbook: {option_message(exc)}", file=sys.stderr)
            # A refused option value (an unknown permission) is a wrong command line.
            return exits.USAGE if _option_refused(exc) else exits.for_status(exc.status)
        except ValueError as exc:
            print(f"evalbook: {exc}", file=sys.stderr)
            return exits.REFUSED

    return run


def with_exit_table(command: argparse.ArgumentParser) -> None:
    """Every command's help ends with the one table of exit statuses (app.domain.exits)."""
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                with_exit_table(sub)
    own = command.epilog or ""
    if exits.TABLE not in own and not any(
        isinstance(a, argparse._SubParsersAction) for a in command._actions
    ):
        command.epilog = f"{own}\n\n{exits.TABLE}".strip()


def _option_refused(error: ProblemErrorLike) -> bool:
    errors = error.errors or []
    return error.status == 422 and bool(errors) and list(errors[0]["loc"])[:1] == ["body"]


def option_message(error: ProblemErrorLike) -> str:
    """An error as the command line says it: a refused body field is named by its option."""
    errors = error.errors or []
    loc = errors[0]["loc"] if errors else []
    if len(loc) >= 2 and loc[0] == "body":
        return f"--{str(loc[1]).replace('_', '-')}: {errors[0]['msg']}"
    return error.detail


def _gate(args: argparse.Namespace) -> int:
    from app.cli.gate import cmd_gate  # on demand: the other commands start without httpx, numpy

    return cmd_gate(args)


def _import(args: argparse.Namespace) -> int:
    from app.cli.importers.run import cmd_import

    return cmd_import(args)


# Long: the whole command line written out, one add_argument per option, so that one
# place reads as the interface's reference (as `evalbook --help` prints it).
def parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    root = CommandParser(
        prog="evalbook",
        description="EvalBook Reports",
        epilog=exits.TABLE,
    )
    commands = root.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="migrate and serve the API")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="the port to listen on")
    serve.add_argument("--workers", type=int, default=1, help="service processes")
    serve.set_defaults(handler=_service("cmd_serve"))
    commands.add_parser("migrate", help="apply pending migrations").set_defaults(
        handler=_service("cmd_migrate")
    )
    project = commands.add_parser("project", help="projects").add_subparsers(
        dest="action", required=True
    )
    project_create = project.add_parser("create", help="create ORG/PROJECT")
    project_create.add_argument("path", help="ORG/PROJECT, two identifiers")
    project_create.set_defaults(handler=_service("cmd_project_create"))
    token = commands.add_parser("token", help="tokens").add_subparsers(dest="action", required=True)
    token_create = token.add_parser("create", help="create a token")
    token_create.add_argument("--project", required=True, help="ORG/PROJECT")
    token_create.add_argument("--name", required=True, help="a name to know the token by")
    token_create.add_argument(
        "--permissions",
        required=True,
        help=f"comma-separated, of: {', '.join(PERMISSIONS)} (admin holds every one)",
    )
    token_create.add_argument(
        "--kind",
        default="user",
        choices=["user", "runner", "peer"],
        help="a runner may vouch for cases above `reported`; a peer only reads",
    )
    token_create.add_argument(
        "--assurance",
        default=None,
        choices=ASSURANCE_LEVELS,
        help="the strongest assurance the token's cases may claim (default: reported)",
    )
    token_create.set_defaults(handler=_service("cmd_token_create"))
    add_verify_parser(commands)
    gate = commands.add_parser(
        "gate",
        help="exit with what the current reports say",
        epilog=GATE_EXITS,
    )
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
    gate.add_argument("--url", help="the service (default: EVALBOOK_URL, else localhost:8000)")
    gate.add_argument("--token", help="a token with report.read (default: EVALBOOK_TOKEN)")
    gate.set_defaults(handler=_gate)
    from app.cli.diff import add_parser as add_diff_parser
    from app.cli.log import add_parsers as add_log_parsers

    add_diff_parser(commands)
    from app.cli.board import add_parser as add_board_parser

    add_board_parser(commands)
    from app.cli.export import add_parser as add_export_parser

    add_export_parser(commands)
    add_log_parsers(commands)
    from app.cli.importers.cli import add_parser as add_import_parser

    add_import_parser(commands, _import)
    keys = commands.add_parser(
        "keys", help="report signing keys and the log's key (the database owner's commands)"
    ).add_subparsers(dest="action", required=True)
    keys.add_parser(
        "init", help="register the signing key and the log's own key (the owner; idempotent)"
    ).set_defaults(handler=_service("cmd_keys"))
    keys.add_parser(
        "rotate-log", help="a new log key under a new origin (witnesses start the new log afresh)"
    ).set_defaults(handler=_service("cmd_keys"))
    keys.add_parser("list", help="every key, active and retired (changes nothing)").set_defaults(
        handler=_service("cmd_keys")
    )
    keys.add_parser("rotate", help="a new active key; the old one keeps verifying").set_defaults(
        handler=_service("cmd_keys")
    )
    incidents = commands.add_parser(
        "incidents", help="incidents (the database owner's commands)"
    ).add_subparsers(dest="action", required=True)
    resolve = incidents.add_parser(
        "resolve", help="close an incident, the log's own included (audited: who and why)"
    )
    resolve.add_argument("incident_id", type=int, help="the incident's id (health lists it)")
    resolve.add_argument("--reason", required=True, help="why it is closed (kept for ever)")
    resolve.set_defaults(handler=_service("cmd_incident_resolve"))
    retention = commands.add_parser("retention", help="the retention policy").add_subparsers(
        dest="action", required=True
    )
    retention_apply = retention.add_parser(
        "apply", help="remove example bodies and case outputs, keeping their digests"
    )
    retention_apply.add_argument(
        "--older-than",
        type=float,
        required=True,
        metavar="DAYS",
        help="remove what is older than this many days (0: everything)",
    )
    retention_apply.add_argument(
        "--dry-run", action="store_true", help="count what would go (and its bytes); remove nothing"
    )
    retention_apply.add_argument(
        "--yes", action="store_true", help="remove without asking (needed without a terminal)"
    )
    retention_apply.set_defaults(handler=_service("cmd_retention_apply"))
    with_exit_table(root)
    return root


class _DefaultsAndText(
    argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter
):
    """Defaults in the options' help, and the epilog as written."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `evalbook` console script."""
    args = parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
