"""Building engine inputs the way the service freezes suites, without a database."""

from __future__ import annotations

import copy
from typing import Any

from app.aggregation.inputs import AggregationInput, CaseColumns, DatasetIndex, columns_from_records
from app.digest.canonical import digest_of
from app.services.definitions import dataset_digest
from app.services.freezing import comparison_family

EVALUATION_ID = "00000000-0000-4000-8000-000000000001"
BASELINE_ID = "00000000-0000-4000-8000-000000000002"


def scorer_digest(scorer: dict[str, Any]) -> str:
    """Digest of a scorer version."""
    return digest_of(
        {"name": scorer["name"], "version": scorer["version"], "definition": scorer["definition"]}
    )


def freeze(
    suite: dict[str, Any], dataset: dict[str, Any], scorers: list[dict[str, Any]]
) -> dict[str, Any]:
    """The frozen content the service would store (defaults written, digests resolved)."""
    content = copy.deepcopy(suite)
    digests = {(s["name"], s["version"]): scorer_digest(s) for s in scorers}
    examples = [
        {"id": e["id"], "body_digest": digest_of(e["body"]), "tags": e["tags"]}
        for e in dataset["examples"]
    ]
    data_digest = dataset_digest(dataset["name"], dataset["version"], examples)
    rule = {
        "rule": "threshold",
        "alpha": 0.05,
        "margin": 0,
        "correction": "none",
        **content.get("decision_rule", {}),
    }
    for check in content["checks"]:
        check.setdefault("required", True)
        check.setdefault("min_coverage", 1.0)
        check.setdefault("min_samples", 1)
        check.setdefault("slices", [])
        if "measure" in check:
            _freeze_slices(check)
            continue
        check.setdefault("repeats", 1)
        check["scorer"]["digest"] = digests[(check["scorer"]["name"], check["scorer"]["version"])]
        check["dataset"]["digest"] = data_digest
        _freeze_slices(check)
    rule["family"] = comparison_family(rule["rule"], content["checks"])
    content["decision_rule"] = rule
    return content


def _freeze_slices(check: dict[str, Any]) -> None:
    for item in check["slices"]:
        item.setdefault("required", False)
        if "cluster_tag_prefix" in check:
            item.setdefault("cluster_tag_prefix", check["cluster_tag_prefix"])
        if check["aggregation"]["method"] != "all_pass":
            item.setdefault("threshold", check["aggregation"]["threshold"])


def dataset_index(dataset: dict[str, Any]) -> DatasetIndex:
    """The engine's view of a dataset."""
    examples = sorted(dataset["examples"], key=lambda e: e["id"])
    return DatasetIndex(tuple(e["id"] for e in examples), tuple(tuple(e["tags"]) for e in examples))


def with_digests(
    cases: list[dict[str, Any]], assurance: str = "platform_verified"
) -> list[dict[str, Any]]:
    """Cases as the service stores them: output digests computed, assurance filled in."""
    stored = []
    for case in cases:
        item = dict(case)
        if item.get("output") is not None:
            item["output_digest"] = digest_of(item["output"])
        item.setdefault("assurance", assurance)
        stored.append(item)
    return stored


def build_input(
    content: dict[str, Any],
    dataset: dict[str, Any],
    scorers: list[dict[str, Any]],
    cases: list[dict[str, Any]],
    baseline: list[dict[str, Any]] | None = None,
    evaluation_id: str = EVALUATION_ID,
    edition: int = 2,
    look: int | None = None,
) -> AggregationInput:
    """An AggregationInput for one dataset shared by every check."""
    index = dataset_index(dataset)
    digests_by_name: dict[str, dict[str, str]] = {}
    ranges: dict[str, tuple[float, float] | None] = {}
    for scorer in scorers:
        digest = scorer_digest(scorer)
        digests_by_name.setdefault(scorer["name"], {})[scorer["version"]] = digest
        score_range = scorer.get("score_range")
        ranges[digest] = (
            None if score_range is None else (float(score_range[0]), float(score_range[1]))
        )

    def columns(records: list[dict[str, Any]]) -> dict[str, CaseColumns]:
        out = {}
        for check in content["checks"]:
            if "measure" in check:
                continue
            mine = [r for r in records if r["check_id"] == check["check_id"]]
            out[check["check_id"]] = columns_from_records(
                mine,
                index,
                check["scorer"]["version"],
                digests_by_name[check["scorer"]["name"]],
                check["scorer"]["digest"],
            )
        return out

    return AggregationInput(
        evaluation_id=evaluation_id,
        suite=content,
        datasets={content["checks"][0]["dataset"]["digest"]: index},
        score_ranges=ranges,
        cases=columns(with_digests(cases)),
        baseline_evaluation_id=None if baseline is None else BASELINE_ID,
        baseline_cases=None if baseline is None else columns(with_digests(baseline)),
        edition=edition,
        look=look,
    )
