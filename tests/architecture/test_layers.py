"""The layer rules of app/ (decision 0002 and the README's "Packages"), type-only imports
included.

Each package (a directory of app/, or a top-level module) belongs to one layer; a module may
import from its own layer and the layers below, never above. The pure core (the engine, the
verifier, the log's formats, hashing and canonical JSON) imports no web, database or object
store library either."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"

# Lowest first. A package may import from its own layer and any layer before it.
LAYERS: list[tuple[str, set[str]]] = [
    (
        "core",
        {
            "domain",
            "canonical",
            "sha256",
            "merkle",
            "manifest_digests",
            "signing",
            "errors",
            "exits",
            "strictjson",
            "memory",
            "tree_hashing",
            "aggregation",
            "tlog",
            "bundles",
            "ingestion",
            "formats",
        },
    ),
    ("platform", {"config", "db", "storage", "outbound", "metrics", "replica", "permissions"}),
    ("models", {"models"}),
    ("repositories", {"repositories"}),
    ("identity", {"auth", "revocations"}),
    ("schemas", {"schemas"}),
    ("services", {"services", "failures"}),
    ("state", {"state", "deps", "access", "tile_lane", "fastlane", "web", "edge"}),
    ("routers", {"routers"}),
    ("application", {"main", "serving", "embedded", "preflight", "commands"}),
    (
        "clients",
        {
            "client",
            "gate",
            "gate_regressions",
            "gate_log",
            "witness_server",
            "diff_command",
            "board_command",
            "export_command",
            "log_cli",
            "log_commands",
            "importers",
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


def layer_of(name: str) -> int:
    """The index of the layer a package or top-level module of app/ belongs to."""
    for index, (_, names) in enumerate(LAYERS):
        if name in names:
            return index
    raise AssertionError(f"app/{name} is in no layer: add it to LAYERS")


def _package(path: Path) -> str | None:
    parts = path.relative_to(APP).with_suffix("").parts
    if parts[0] in ("__init__", "migrations"):
        return None
    return parts[0]


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module == "app":
                found += [(node.lineno, f"app.{alias.name}") for alias in node.names]
    return found


def violations() -> list[str]:
    """Every import that crosses a layer upward, or brings a server library into the core."""
    found = []
    core = layer_of("aggregation")
    clients = layer_of("client")
    for path in sorted(APP.rglob("*.py")):
        package = _package(path)
        if package is None:
            continue
        mine = layer_of(package)
        for line, module in _imports(ast.parse(path.read_text())):
            where = f"{path.relative_to(APP.parent)}:{line} imports {module}"
            top = module.split(".")[0]
            if mine == core and top in NOT_IN_CORE:
                found.append(where)
            if top != "app" or module == "app":
                continue
            name = module.split(".")[1]
            if name == "__version__":  # app/__init__.py: the package's version, no code
                continue
            theirs = layer_of(name)
            if theirs > mine or (mine == clients and LAYERS[theirs][0] not in CLIENT_MAY_USE):
                found.append(where)
    return found


def test_no_import_crosses_a_layer_upward() -> None:
    """Routers → services → repositories → models; the core imports nothing above it."""
    assert violations() == []


def test_every_package_has_a_layer() -> None:
    """A new package is placed in a layer before it lands."""
    for path in APP.iterdir():
        name = path.stem if path.suffix == ".py" else path.name
        if name in ("__init__", "migrations", "__pycache__", "py") or path.suffix not in (
            ".py",
            "",
        ):
            continue
        if path.is_dir() and not (path / "__init__.py").exists():
            continue
        layer_of(name)
