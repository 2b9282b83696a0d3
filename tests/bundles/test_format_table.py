"""The bundle format is written once (app/bundles/format.py): the Structs of lines.py and the
Node verifier's table are generated from it and kept so; both verifiers read its types the same
way; the fast lanes' column checks are never looser than the careful path's."""

from __future__ import annotations

import copy
import gzip
import itertools
from typing import Any

import orjson
import pytest

from app.bundles import codegen, format, lanes, shapes
from tests.bundle_helpers import REPO, node_map

RICH = REPO / "tests" / "bundles" / "rich_pass" / "bundle.jsonl.gz"
ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.0,
    1.5,
    2**53,
    "",
    "pass",
    "sha256:" + "0" * 64,
    "sha256:" + "A" * 64,
    [],
    ["x"],
    ["sha256:" + "1" * 64],
    {},
    {"digest": "sha256:" + "2" * 64, "id": "t"},
    {"digest": "x", "id": "t"},
]


def test_generated_copies_are_what_the_table_makes() -> None:
    """`python -m app.bundles.codegen` leaves nothing to change."""
    for path, text in codegen.written().items():
        assert path.read_text() == text, f"{path.name}: run python -m app.bundles.codegen"


def test_the_table_derives_the_lookups() -> None:
    assert format.REQUIRED["case"][:2] == ("check_id", "example_id")
    assert format.OPTIONAL["header"] == ("keys",)
    assert {"header", "report", "suite_version"} == format.ONCE
    assert "kind" in format.ALLOWED["trailer"]
    assert [format.PHASES[k] for k in format.KINDS] == sorted(format.PHASES.values())


def _lines() -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in gzip.decompress(RICH.read_bytes()).splitlines()]


def _mutations() -> list[tuple[str, dict[str, Any]]]:
    """Each kind's first line of the rich bundle, with each field (and a nested field of the
    body and the suite) set to each odd value in turn."""
    firsts: dict[str, dict[str, Any]] = {}
    for line in _lines():
        firsts.setdefault(line["kind"], line)
    found = []
    for kind, line in firsts.items():
        for name, value in itertools.product([n for n in line if n != "kind"], ODD_VALUES):
            found.append((kind, {**line, name: value}))
        found.append((kind, {k: v for k, v in line.items() if k not in format.OPTIONAL[kind]}))
    report = firsts["report"]
    for name, value in itertools.product(["suite_ref", "checks", "subject"], ODD_VALUES):
        mutated = copy.deepcopy(report)
        mutated["body"][name] = value
        found.append(("report", mutated))
    for name, value in itertools.product(["slices", "comparison", "evidence_manifest"], ODD_VALUES):
        mutated = copy.deepcopy(report)
        mutated["body"]["checks"][0][name] = value
        found.append(("report", mutated))
    suite = firsts["suite_version"]
    for value in ODD_VALUES:
        mutated = copy.deepcopy(suite)
        mutated["content"]["checks"][0]["scorer"] = value
        found.append(("suite_version", mutated))
    return found


def test_both_verifiers_name_the_same_failure_for_every_mistyped_field() -> None:
    mutations = _mutations()
    python = [shapes._checks_problem(kind, value) for kind, value in mutations]
    node = node_map("checksProblem", [[kind, value] for kind, value in mutations], spread=True)
    assert node == python
    assert len({p for p in python if p}) >= 15  # the mutations reach most failures


@pytest.mark.parametrize(
    "type_",
    [
        t
        for kind in ("case", "example")
        for t in format.FIELD_TYPES[kind].values()
        if t["type"] not in ("object", "shape")
    ],
    ids=repr,
)
def test_a_lane_column_check_is_never_looser_than_the_careful_one(type_: dict[str, Any]) -> None:
    for value in ODD_VALUES:
        if lanes.column_holds(type_, [value]):
            assert shapes.holds(type_, value), value
    assert lanes.column_holds(type_, [])
