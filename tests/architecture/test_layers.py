"""The layer rules of app/ (decision 0002 and docs/architecture.md), type-only imports
included.

Each folder of app/ (or a subfolder or module named on its own) belongs to one layer; a module may
import from its own layer and the layers below, never above. The pure core (the engine, the
verifier, the log's formats, hashing and canonical JSON) imports no web, database or object
store library either."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"

# Lowest first: the folders of app/ (docs/architecture.md). A module may import from its own
# layer and any layer before it. A dotted name places a subfolder or module on its own layer;
# the longest name that holds a module decides.
LAYERS: list[tuple[str, set[str]]] = [
    ("core", {"domain", "digest", "aggregation", "ingestion", "bundles", "tlog", "formats"}),
    ("platform", {"platform"}),
    ("models", {"models"}),
    ("repositories", {"repositories"}),
    ("identity", {"identity"}),
    ("schemas", {"schemas"}),
    ("services", {"services"}),
    ("workers", {"workers"}),
    ("api", {"api"}),
    ("routers", {"api.routers"}),
    ("application", {"api.main", "api.serving"}),
    (
        "clients",
        {
            "cli.registry",
            "cli.client",
            "cli.gate",
            "cli.gate_command",
            "cli.verify",
            "cli.gate_regressions",
            "cli.gate_log",
            "cli.witness_server",
            "cli.diff",
            "cli.board",
            "cli.export",
            "cli.log",
            "cli.log_checks",
            "cli.importers",
        },
    ),
    # The `evalbook` command: serves (the application) or runs a client.
    ("command", {"cli"}),
]
# The command-line clients talk HTTP to the service: they may use the core and the client,
# nothing of the service's own layers.
CLIENT_MAY_USE = {"core", "clients"}
# Libraries the pure core never imports.
NOT_IN_CORE = {"fastapi", "starlette", "sqlalchemy", "asyncpg", "aiobotocore", "httpx", "jinja2"}
# What may sit at the top of app/ beside the folders.
TOP_LEVEL = {"__init__.py", "py.typed", "migrations", "__pycache__"}


def layer_of(module: str) -> int:
    """The index of the layer a module of app/ (dotted, below `app`) belongs to."""
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        for index, (_, names) in enumerate(LAYERS):
            if prefix in names:
                return index
    raise AssertionError(f"app/{module} is in no layer: add its folder to LAYERS")


def _module(path: Path) -> str | None:
    parts = path.relative_to(APP).with_suffix("").parts
    if parts[0] in ("__init__", "migrations"):
        return None
    return ".".join(part for part in parts if part != "__init__")


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module.startswith("app"):
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def violations() -> list[str]:
    """Every import that crosses a layer upward, or brings a server library into the core."""
    found = []
    core = layer_of("aggregation")
    clients = layer_of("cli.client")
    for path in sorted(APP.rglob("*.py")):
        module = _module(path)
        if module is None:
            continue
        mine = layer_of(module)
        for line, imported in _imports(ast.parse(path.read_text())):
            where = f"{path.relative_to(APP.parent)}:{line} imports {imported}"
            top = imported.split(".")[0]
            if mine == core and top in NOT_IN_CORE:
                found.append(where)
            if top != "app" or imported == "app" or imported == "app.__version__":
                continue  # app/__init__.py holds the package's version, no code
            theirs = layer_of(imported.removeprefix("app."))
            if theirs > mine or (mine == clients and LAYERS[theirs][0] not in CLIENT_MAY_USE):
                found.append(where)
    return found


def test_no_import_crosses_a_layer_upward() -> None:
    """Routers → services → repositories → models; the core imports nothing above it."""
    assert violations() == []


def test_every_module_has_a_layer_and_the_top_holds_only_folders() -> None:
    """A new folder is placed in a layer before it lands; app/ holds folders, not modules."""
    assert {path.name for path in APP.iterdir()} - TOP_LEVEL == {
        name for _, names in LAYERS for name in names if "." not in name
    }
    for path in APP.rglob("*.py"):
        module = _module(path)
        if module is not None:
            layer_of(module)
