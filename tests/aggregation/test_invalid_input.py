"""The engine's contract for input it cannot aggregate: it raises InvalidInput, naming the
fault, and nothing else. Every field of a frozen suite content is deleted or given each wrong
type in turn; the engine either aggregates the result or raises InvalidInput (a KeyError or
TypeError would be a bug, and --replay no longer catches those)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from app.aggregation.engine import aggregate
from app.aggregation.inputs import AggregationInput, InvalidInput
from app.aggregation.suite_content import check_suite
from tests.aggregation.test_aggregation_rules import SCORERS, c, check, comparative_cases, dataset
from tests.aggregation_helpers import build_input, freeze
from tests.bundles.test_bundle_fuzz import leaf_paths

DELETE = object()
WRONG_VALUES: list[Any] = [DELETE, None, "x", -1, 0, 1.5, 10**12, True, [], {}]
Path = tuple[str | int, ...]
# Described, not aggregated: the engine reads no value of it.
NOT_READ: set[Path] = {("validity_hours",)}


def _suite() -> dict[str, Any]:
    """A comparative suite with every kind of check, a slice, clusters and a family."""
    checks = [
        check(
            "acc",
            threshold=0.5,
            cluster_tag_prefix="d",
            min_clusters=2,
            slices=[{"name": "de", "tag": "de", "required": True}],
        ),
        check("help", method="mean", threshold=0.5, scorer="r", repeats=1),
        check("safe", method="all_pass", threshold=None),
        check("low", method="min", threshold=0.1, scorer="r", required=False),
    ]
    rule = {"rule": "non_inferiority", "correction": "holm", "margin": 0.01, "alpha": 0.05}
    return {"validity_hours": 1, "checks": checks, "decision_rule": rule}


def _input() -> AggregationInput:
    data = dataset(12)
    content = freeze(_suite(), data, SCORERS)
    candidate, baseline = comparative_cases(0.02, seed=3, n=12)
    candidate = [r for r in candidate if r["check_id"] != "opt"]
    baseline = [r for r in baseline if r["check_id"] != "opt"]
    candidate += [c(i, check_id="low", score=0.5) for i in range(12)]
    return build_input(content, data, SCORERS, candidate, baseline=baseline)


INPUT = _input()


def _with(content: dict[str, Any], path: Path, replacement: Any) -> dict[str, Any]:
    changed = copy.deepcopy(content)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    if replacement is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return changed


def test_the_frozen_suite_conforms() -> None:
    check_suite(INPUT.suite)
    assert aggregate(INPUT).body["checks"]


@pytest.mark.parametrize(
    "path",
    [path for path, _ in leaf_paths(INPUT.suite) if path],
    ids=lambda p: "/".join(map(str, p)),
)
def test_a_wrong_field_is_aggregated_or_named_as_invalid_input(path: Path) -> None:
    content = dict(INPUT.suite)
    refused = 0
    for replacement in WRONG_VALUES:
        changed = _with(content, path, replacement)
        try:
            aggregate(dataclasses.replace(INPUT, suite=changed))
        except InvalidInput as exc:
            assert str(exc), (path, replacement)
            refused += 1
    # Every field the engine reads takes some value of the wrong type or range.
    assert refused > 0 or path in NOT_READ, path


def test_a_dataset_the_input_lacks_is_named() -> None:
    with pytest.raises(
        InvalidInput, match=r"'acc' names dataset sha256:[0-9a-f]{64}, which the input lacks"
    ):
        aggregate(dataclasses.replace(INPUT, datasets={}))


@pytest.mark.parametrize(
    ("case", "fault"),
    [
        ({"example_id": "nowhere"}, "example 'nowhere' is not in the dataset"),
        ({"repeat": 1}, "a case lies outside the check's examples or repeats"),
        ({"repeat": 2**31}, "a repeat above 2147483647"),
        ({"example_id": "e01"}, r"two cases share a \(check, example, repeat\)"),
    ],
)
def test_a_case_off_its_checks_grid_is_named(case: dict[str, Any], fault: str) -> None:
    data = dataset(12)
    content = freeze(_suite(), data, SCORERS)
    cases = [c(i, check_id="safe") for i in range(12)]
    cases[0] = {**cases[0], **case}
    with pytest.raises(InvalidInput, match=fault):
        aggregate(build_input(content, data, SCORERS, cases))


def test_a_second_check_of_one_id_and_a_wrong_slice_threshold_are_named() -> None:
    content = copy.deepcopy(INPUT.suite)
    content["checks"].append(copy.deepcopy(content["checks"][0]))
    with pytest.raises(InvalidInput, match="a second check 'acc'"):
        check_suite(content)
    content = _with(INPUT.suite, ("checks", 0, "slices", 0, "threshold"), 1.5)
    with pytest.raises(InvalidInput, match="slice 'de' of check 'acc'"):
        check_suite(content)
    content = _with(INPUT.suite, ("checks", 2, "cluster_tag_prefix"), "d")
    with pytest.raises(InvalidInput, match="'safe' has clusters"):
        check_suite(content)
