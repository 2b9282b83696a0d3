"""The size budgets of app/ (docs/decisions/0003-budgets.md): a function over 60 lines says
why in a `# Long:` comment just above it; no module over 500 lines. Complexity (at most 15)
is ruff's C901, set in pyproject.toml."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500


def _modules() -> list[Path]:
    return sorted(p for p in APP.rglob("*.py") if "migrations" not in p.parts)


def _explained(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a `# Long:` comment stands on the lines just above the function's decorators."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    above = first - 1
    while above >= 0 and lines[above].strip().startswith("#"):
        if lines[above].strip().startswith("# Long:"):
            return True
        above -= 1
    return False


def long_functions(path: Path) -> list[str]:
    """The functions of a module over the budget with no `# Long:` comment."""
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > MAX_FUNCTION_LINES and not _explained(lines, node):
            found.append(f"{path.relative_to(APP.parent)}:{node.lineno} {node.name} ({length})")
    return found


def test_functions_within_60_lines_or_say_why() -> None:
    """Every function over 60 lines carries its reason."""
    assert [f for path in _modules() for f in long_functions(path)] == []


def test_modules_within_500_lines() -> None:
    """No module of app/ (outside the migrations) is over 500 lines."""
    over = {
        str(p.relative_to(APP.parent)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert over == {}


def test_the_budget_finds_a_long_function(tmp_path: Path) -> None:
    """The check itself: a long function is found, and a `# Long:` comment excuses it."""
    body = "\n".join(f"    x{i} = {i}" for i in range(70))
    module = tmp_path / "app" / "m.py"
    module.parent.mkdir()
    module.write_text(f"def f():\n{body}\n")
    global APP
    saved, APP = APP, tmp_path / "app"
    try:
        assert [f.split()[1] for f in long_functions(module)] == ["f"]
        module.write_text(f"# Long: a table written out.\ndef f():\n{body}\n")
        assert long_functions(module) == []
    finally:
        APP = saved


def complex_functions(source: str) -> list[str]:
    """Functions and methods above radon's cyclomatic complexity 15 (radon counts boolean
    operators and comprehensions, which ruff's C901 does not)."""
    from radon.complexity import cc_visit

    return [
        f"{block.name} ({block.complexity})" for block in cc_visit(source) if block.complexity > 15
    ]


def test_no_function_above_complexity_15_by_radon() -> None:
    """Issue 50's budget: no function of app/ above 15 by radon either."""
    found = [
        f"{path.relative_to(APP.parent)}: {name}"
        for path in _modules()
        for name in complex_functions(path.read_text())
    ]
    assert found == []


def test_radon_finds_a_branching_function() -> None:
    """The check itself: sixteen conditions make one function too complex."""
    body = "\n".join(f"    if x == {i} or y:\n        return {i}" for i in range(8))
    assert complex_functions(f"def f(x, y):\n{body}\n    return -1\n") == ["f (17)"]
