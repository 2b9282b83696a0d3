"""The two copies the bundle format's table (app/bundles/format.py) makes of itself: the
decoding Structs of app/bundles/lines.py and the table in verify-bundle.mjs, each between its
markers. `python -m app.bundles.codegen` rewrites both; a test holds them to the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from app.bundles.format import KINDS, Type, table

ROOT = Path(__file__).resolve().parents[2]
LINES = ROOT / "app" / "bundles" / "lines.py"
NODE = ROOT / "verify-bundle.mjs"
PY_BEGIN = "# ---- generated from app/bundles/format.py (python -m app.bundles.codegen) ----\n"
PY_END = "# ---- end of what app/bundles/format.py generates ----\n"
JS_BEGIN = (
    "// ---- FORMAT TABLE: generated from app/bundles/format.py"
    " (python -m app.bundles.codegen) ----\n"
)
JS_END = "// ---- end of FORMAT TABLE ----\n"
_STRINGS = ("string", "digest")


def annotation(type_: Type) -> str:
    """The Python annotation of a decoded field of `type_`."""
    name = type_["type"]
    if name in _STRINGS or name == "one_of":
        return "str"
    if name in ("integer", "number"):
        return "int | float"
    if name == "boolean":
        return "bool"
    if name == "nullable":
        return f"{annotation(type_['of'])} | None"
    if name == "list":
        return f"list[{annotation(type_['of'])}]"
    if (
        name == "object"
        and type_["fields"]
        and all(field["type"] in _STRINGS for field in type_["fields"].values())
    ):
        return "dict[str, str]"
    if name in ("object", "shape"):
        return "dict[str, Any]"
    return "Any"


def _declaration(field: list[Any]) -> str:
    name, type_ = field[0], field[1]
    written = annotation(type_)
    if len(field) == 2:
        return f"    {name}: {written}"
    absent = "UNSET" if field[2] == "unset" else "None"
    if written != "Any":
        written += " | UnsetType" if absent == "UNSET" else " | None"
    return f"    {name}: {written} = {absent}"


def class_name(kind: str) -> str:
    """The Struct of a line kind: `baseline_case` is BaselineCaseLine."""
    return "".join(part.capitalize() for part in kind.split("_")) + "Line"


def lines_block() -> str:
    """The Structs of every line kind and their union, as lines.py holds them."""
    out = [PY_BEGIN]
    seen: dict[int, str] = {}
    for kind, spec in KINDS.items():
        same = seen.get(id(spec["fields"]))
        base = same or "Line"
        out.append(f'\n\nclass {class_name(kind)}({base}, tag="{kind}", frozen=True):\n')
        if same:
            out.append("    pass\n")
            continue
        seen[id(spec["fields"])] = class_name(kind)
        out += [_declaration(field) + "\n" for field in spec["fields"]]
    union = "\n".join(f"    | {class_name(kind)}" for kind in KINDS).replace("    | ", "    ", 1)
    out.append(f"\n\nBundleLine = (\n{union}\n)\n")
    out.append(PY_END)
    return "".join(out)


def node_block() -> str:
    """The table as the Node verifier holds it: one line per kind and per items table."""
    whole = table()

    def entries(mapping: dict[str, Any], indent: str) -> str:
        return ",\n".join(f"{indent}{json.dumps(k)}: {json.dumps(v)}" for k, v in mapping.items())

    body = (
        f'  "format": {json.dumps(whole["format"])},\n'
        f'  "kinds": {{\n{entries(whole["kinds"], "    ")}\n  }},\n'
        f'  "items": {{\n{entries(whole["items"], "    ")}\n  }},\n'
        f'  "key_fields": {json.dumps(whole["key_fields"])}\n'
    )
    return f"{JS_BEGIN}const TABLE = {{\n{body}}};\n{JS_END}"


def spliced(text: str, begin: str, end: str, block: str) -> str:
    """`text` with what lies between its markers (the markers included) replaced by `block`."""
    start, stop = text.index(begin), text.index(end) + len(end)
    return text[:start] + block + text[stop:]


def written() -> dict[Path, str]:
    """Each file as it must read, with its block generated from the table."""
    return {
        LINES: spliced(LINES.read_text(), PY_BEGIN, PY_END, lines_block()),
        NODE: spliced(NODE.read_text(), JS_BEGIN, JS_END, node_block()),
    }


if __name__ == "__main__":
    for path, text in written().items():
        path.write_text(text)
    sys.exit(0)
