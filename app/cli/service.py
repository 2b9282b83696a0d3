"""The subcommands that run the service's own code (serve, migrate, projects, tokens, keys,
incidents, retention): declared here, light; each runs a function of app/cli/commands.py,
imported only when it runs, with settings from the environment."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from app.cli.registry import Command, Group
from app.domain import exits
from app.domain.vocabulary import ASSURANCE_LEVELS
from app.identity.permissions import PERMISSIONS

if TYPE_CHECKING:
    from app.platform.config import Settings

ServiceHandler = Callable[[argparse.Namespace, "Settings"], int]


class ProblemErrorLike(Protocol):
    """What the command line reads of an `app.domain.errors.ProblemError` (imported lazily)."""

    status: int
    detail: str
    errors: list[dict[str, Any]] | None


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


def in_service(handler: ServiceHandler, args: argparse.Namespace) -> int:
    """Run a service command with settings from the environment; its refusals as exits."""
    from app.domain.errors import ProblemError
    from app.platform.config import Settings

    try:
        return handler(args, Settings())
    except ProblemError as exc:
        print(f"evalbook: {option_message(exc)}", file=sys.stderr)
        # A refused option value (an unknown permission) is a wrong command line.
        return exits.USAGE if _option_refused(exc) else exits.for_status(exc.status)
    except ValueError as exc:
        print(f"evalbook: {exc}", file=sys.stderr)
        return exits.REFUSED


def _serve(args: argparse.Namespace) -> int:
    from app.cli.commands import cmd_serve

    return in_service(cmd_serve, args)


def _migrate(args: argparse.Namespace) -> int:
    from app.cli.commands import cmd_migrate

    return in_service(cmd_migrate, args)


def _project_create(args: argparse.Namespace) -> int:
    from app.cli.commands import cmd_project_create

    return in_service(cmd_project_create, args)


def _token_create(args: argparse.Namespace) -> int:
    from app.cli.commands import cmd_token_create

    return in_service(cmd_token_create, args)


def _keys(args: argparse.Namespace) -> int:
    from app.cli.commands import cmd_keys

    return in_service(cmd_keys, args)


def _incident_resolve(args: argparse.Namespace) -> int:
    from app.cli.commands import cmd_incident_resolve

    return in_service(cmd_incident_resolve, args)


def _retention_apply(args: argparse.Namespace) -> int:
    from app.cli.commands import cmd_retention_apply

    return in_service(cmd_retention_apply, args)


def _serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="the port to listen on")
    parser.add_argument("--workers", type=int, default=1, help="service processes")


def _project_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="ORG/PROJECT, two identifiers")


def _token_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", required=True, help="ORG/PROJECT")
    parser.add_argument("--name", required=True, help="a name to know the token by")
    parser.add_argument(
        "--permissions",
        required=True,
        help=f"comma-separated, of: {', '.join(PERMISSIONS)} (admin holds every one)",
    )
    parser.add_argument(
        "--kind",
        default="user",
        choices=["user", "runner", "peer", "labeller"],
        help="a runner may vouch for cases above `reported`; a peer only reads; a labeller "
        "only attests human labels (label.write), never cases",
    )
    parser.add_argument(
        "--assurance",
        default=None,
        choices=ASSURANCE_LEVELS,
        help="the strongest assurance the token's cases may claim (default: reported)",
    )


def _resolve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("incident_id", type=int, help="the incident's id (health lists it)")
    parser.add_argument("--reason", required=True, help="why it is closed (kept for ever)")


def _retention_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--older-than",
        type=float,
        required=True,
        metavar="DAYS",
        help="remove what is older than this many days (0: everything)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="count what would go (and its bytes); remove nothing"
    )
    parser.add_argument(
        "--yes", action="store_true", help="remove without asking (needed without a terminal)"
    )


SERVING: list[Command | Group] = [
    Command(("serve",), "migrate and serve the API", _serve, _serve_options),
    Command(("migrate",), "apply pending migrations", _migrate),
    Group(("project",), "projects"),
    Command(("project", "create"), "create ORG/PROJECT", _project_create, _project_options),
    Group(("token",), "tokens"),
    Command(("token", "create"), "create a token", _token_create, _token_options),
]
OWNING: list[Command | Group] = [
    Group(("keys",), "report signing keys and the log's key (the database owner's commands)"),
    Command(
        ("keys", "init"),
        "register the signing key and the log's own key (the owner; idempotent)",
        _keys,
    ),
    Command(
        ("keys", "rotate-log"),
        "a new log key under a new origin (witnesses start the new log afresh)",
        _keys,
    ),
    Command(("keys", "list"), "every key, active and retired (changes nothing)", _keys),
    Command(("keys", "rotate"), "a new active key; the old one keeps verifying", _keys),
    Group(("incidents",), "incidents (the database owner's commands)"),
    Command(
        ("incidents", "resolve"),
        "close an incident, the log's own included (audited: who and why)",
        _incident_resolve,
        _resolve_options,
    ),
    Group(("retention",), "the retention policy"),
    Command(
        ("retention", "apply"),
        "remove example bodies and case outputs, keeping their digests",
        _retention_apply,
        _retention_options,
    ),
]
