"""One way to add an `evalbook` subcommand (app/cli/registry.py): every command is declared as a
`Command`, gets the one exit table, and a client of the service gets `--url`, `--token` (naming
its permission) and `--json` the same way."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from app.cli.main import DECLARED, parser
from app.cli.registry import Client, Command, Group, build
from app.domain import exits

APP = Path(__file__).resolve().parents[2] / "app"


def _leaves(
    command: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = []
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _leaves(sub, (*words, name))
    return found or [(words, command)]


def test_every_declared_command_is_a_leaf_of_the_parser() -> None:
    declared = {e.words for entries in DECLARED for e in entries if isinstance(e, Command)}
    assert {words for words, _ in _leaves(parser())} == declared


def test_every_command_ends_its_help_with_the_exit_table() -> None:
    for words, command in _leaves(parser()):
        assert (command.epilog or "").endswith(exits.TABLE), words


def test_clients_take_url_and_token_naming_their_permission() -> None:
    commands = {e.words: e for entries in DECLARED for e in entries if isinstance(e, Command)}
    for words, command in _leaves(parser()):
        client = commands[words].client
        options = {o: a for a in command._actions for o in a.option_strings}
        if client is None:
            continue
        assert {"--url", "--token"} <= options.keys(), words
        assert client.permission in (options["--token"].help or ""), words
        assert ("--json" in options) == (client.json is not None), words


def test_a_usage_error_exits_64() -> None:
    with pytest.raises(SystemExit) as raised:
        parser().parse_args(["diff"])
    assert raised.value.code == exits.USAGE


def test_a_group_is_declared_before_its_commands() -> None:
    def run(args: argparse.Namespace) -> int:
        return 0

    with pytest.raises(ValueError, match="declared after"):
        build([Command(("keys", "list"), "keys", run), Group(("keys",), "keys")])
    built = build([Group(("keys",), "keys"), Command(("keys", "list"), "keys", run, client=None)])
    args = built.parse_args(["keys", "list"])
    assert args.handler(args) == 0
    assert Client("report.read").json is None


def test_no_module_adds_a_subcommand_by_hand() -> None:
    """Only the registry calls argparse's add_parser or add_subparsers."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        if path == APP / "cli" / "registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("add_parser", "add_subparsers")
            ):
                found.append(f"{path.relative_to(APP.parent)}:{node.lineno}")
    assert found == []
