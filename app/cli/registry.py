"""The one way a subcommand joins `evalbook`: a `Command` in some module's `COMMANDS`, listed in
app/cli/main.py. A command names its words, help, options and the function that runs it; its
exits and, for a client of the service, `--url`, `--token` and `--json` come from here, so
every command says them the same way.

This module stays light (argparse only): `evalbook verify-bundle` builds the whole parser and
must start without the web and database stack.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

from app.domain import exits

Handler = Callable[[argparse.Namespace], int]
Options = Callable[[argparse.ArgumentParser], None]


class Client(NamedTuple):
    """A command that talks to the service: `--url`, `--token` (with the permission it needs)
    and, where `json` says what it prints, `--json`."""

    permission: str
    json: str | None = None


class Group(NamedTuple):
    """Words that only group subcommands (`evalbook keys ...`), with their help."""

    words: tuple[str, ...]
    help: str


class Command(NamedTuple):
    """One subcommand: the words that name it, its help, its options and what runs it."""

    words: tuple[str, ...]
    help: str
    run: Handler
    options: Options | None = None
    epilog: str = ""
    client: Client | None = None


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
        self.exit(exits.USAGE, f"{self.prog}: error: {message}\n")


def _client_options(parser: argparse.ArgumentParser, client: Client) -> None:
    if client.json is not None:
        parser.add_argument("--json", action="store_true", help=client.json)
    parser.add_argument("--url", help="the service (default: EVALBOOK_URL, else localhost:8000)")
    parser.add_argument(
        "--token", help=f"a token with {client.permission} (default: EVALBOOK_TOKEN)"
    )


class Registry:
    """The subparsers of `evalbook`, filled one declaration at a time."""

    def __init__(self, root: argparse.ArgumentParser) -> None:
        self._groups: dict[tuple[str, ...], Any] = {
            (): root.add_subparsers(dest="command", required=True)
        }

    def _subparsers(self, words: tuple[str, ...]) -> Any:
        if words not in self._groups:
            raise ValueError(f"the group {' '.join(words)!r} is declared after its commands")
        return self._groups[words]

    def add(self, entry: Command | Group) -> None:
        """Declare a group or a command under the groups declared before it."""
        *above, name = entry.words
        subparsers = self._subparsers(tuple(above))
        if isinstance(entry, Group):
            group = subparsers.add_parser(name, help=entry.help)
            self._groups[entry.words] = group.add_subparsers(dest="action", required=True)
            return
        epilog = f"{entry.epilog}\n\n{exits.TABLE}".strip()
        parser = subparsers.add_parser(name, help=entry.help, epilog=epilog)
        if entry.options is not None:
            entry.options(parser)
        if entry.client is not None:
            _client_options(parser, entry.client)
        parser.set_defaults(handler=entry.run)


def build(entries: list[Command | Group]) -> argparse.ArgumentParser:
    """The parser of `evalbook` with every declared group and command."""
    root = CommandParser(prog="evalbook", description="EvalBook Reports", epilog=exits.TABLE)
    registry = Registry(root)
    for entry in entries:
        registry.add(entry)
    return root
