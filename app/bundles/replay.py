"""--replay: re-run the aggregation engine on a bundle's cases and compare with the body."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from app.aggregation.engine import aggregate
from app.aggregation.inputs import (
    AggregationInput,
    DatasetIndex,
    InvalidInput,
    columns_from_records,
)
from app.aggregation.label_input import judged_label_columns
from app.aggregation.rounding import FIRST_EDITION, SECOND_EDITION
from app.aggregation.suite_content import check_suite
from app.bundles.lines import ScorerVersionLine
from app.bundles.results import Finding, Proven, failure

if TYPE_CHECKING:
    from app.bundles.facts import Facts

TOLERANCE = 1e-9
_INTERVAL_KEYS = {"lower", "upper"}
# Observations added with the statistics of docs/verdicts.md, sections 7 to 9. A report issued
# before them carries none; its replay leaves them (and the "underpowered" clause of an
# explanation) out of the comparison rather than calling the report wrong.
STATISTICS_CODES = frozenset(
    {
        "clusters",
        "design_effect",
        "mde",
        "underpowered",
        "flaky_examples",
        "pass_all_repeats",
        "pass_any_repeat",
    }
)
_UNDERPOWERED_CLAUSE = "; underpowered: "


def predates_statistics(body: dict[str, Any]) -> bool:
    """True when no check of the body carries a statistics observation."""
    return not any(
        isinstance(observation, dict) and observation.get("code") in STATISTICS_CODES
        for check in body.get("checks") or []
        if isinstance(check, dict)
        for observation in check.get("observations") or []
    )


def _without_statistics(body: dict[str, Any]) -> None:
    for check in body.get("checks", []):
        check["observations"] = [
            o for o in check["observations"] if o.get("code") not in STATISTICS_CODES
        ]
        explanation = check.get("explanation", "")
        if _UNDERPOWERED_CLAUSE in explanation:
            check["explanation"] = explanation.split(_UNDERPOWERED_CLAUSE, 1)[0] + "."


def edition_of(body: dict[str, Any]) -> int:
    """The statistics rules the body names (`decision_rule.edition`; none named: the first)."""
    rule = body.get("decision_rule")
    edition = rule.get("edition") if isinstance(rule, dict) else None
    if type(edition) is not int or edition < SECOND_EDITION:
        return FIRST_EDITION
    return edition


def _look(body: dict[str, Any]) -> int | None:
    rule = body.get("decision_rule")
    look = rule.get("look") if isinstance(rule, dict) else None
    return look if isinstance(look, int) and look >= 1 else None


def predates_case_trees(body: dict[str, Any]) -> bool:
    """True when no check of the body carries a cases tree (issued before they were)."""
    return not any(
        isinstance(check, dict) and "cases" in check for check in body.get("checks") or []
    )


def _without_case_trees(body: dict[str, Any]) -> None:
    for check in body.get("checks", []):
        check.pop("cases", None)
        comparison = check.get("comparison")
        if isinstance(comparison, dict):
            comparison.pop("baseline_cases", None)
            comparison.pop("baseline_report_digest", None)


def _baseline_report_digest(body: dict[str, Any]) -> str | None:
    """The baseline report digest the body names (the service looked it up when issuing)."""
    for check in body.get("checks") or []:
        comparison = check.get("comparison") if isinstance(check, dict) else None
        if isinstance(comparison, dict) and "baseline_report_digest" in comparison:
            value = comparison["baseline_report_digest"]
            return value if isinstance(value, str) else None
    return None


def producer_matches(producer: dict[str, Any]) -> bool:
    """True when the bundle's producer (its header's) is this verifier's service and numpy
    versions."""
    try:
        service = importlib.metadata.version("evalbook-reports")
    except importlib.metadata.PackageNotFoundError:
        service = None
    return (
        producer.get("numpy_version") == np.__version__
        and producer.get("service_version") == service
    )


def _columns(facts: Facts, kind: str, datasets: dict[str, DatasetIndex]) -> dict[str, Any]:
    out = {}
    for check in facts.suite["checks"]:
        if "measure" in check:
            # A measure check reads the cases of the check it measures.
            continue
        digest = check["dataset"]["digest"]
        dataset = datasets.get(digest)
        if dataset is None:
            raise InvalidInput(
                f"check {check['check_id']!r} names dataset {digest}, not in the bundle"
            )
        records = [
            {**case, "scorer_version": case.get("scorer_digest") or ""}
            for case in facts.cases[kind].get(check["check_id"], [])
        ]
        digests = {r["scorer_version"]: r["scorer_version"] for r in records}
        out[check["check_id"]] = columns_from_records(
            records,
            dataset,
            "",
            digests,
            check["scorer"]["digest"],
        )
    return out


def _bounds_differ(expected: Any, actual: Any) -> bool:
    """Whether two interval bounds differ beyond the replay's tolerance (or one is missing)."""
    if expected == actual:
        return False
    return expected is None or actual is None or abs(float(expected) - float(actual)) > TOLERANCE


def _differences(
    path: str, expected: Any, actual: Any, compare_intervals: bool, found: list[str]
) -> None:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected.keys() | actual.keys()):
            if key in _INTERVAL_KEYS and path.endswith("interval"):
                e, a = expected.get(key), actual.get(key)
                if compare_intervals and _bounds_differ(e, a):
                    found.append(f"{path}.{key}: expected {e}, actual {a}")
                continue
            _differences(
                f"{path}.{key}", expected.get(key), actual.get(key), compare_intervals, found
            )
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _differences(f"{path}[{index}]", e, a, compare_intervals, found)
    elif expected != actual:
        found.append(f"{path}: expected {expected!r}, actual {actual!r}")


def _score_range(line: ScorerVersionLine) -> tuple[float, float] | None:
    """A scorer line's score range: none, or [low, high] with low below high."""
    try:
        score_range = msgspec.convert(line.score_range, tuple[float, float] | None)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"scorer {line.name} {line.version}: score_range: {exc}") from None
    if score_range is not None and not score_range[0] < score_range[1]:
        raise InvalidInput(f"scorer {line.name} {line.version}: score_range is not [low, high]")
    return score_range


def replay(facts: Facts, last_line: int) -> Generator[Finding, None, str]:
    """Aggregate again; yield a failure per difference; return a one-line summary. A bundle
    whose suite, scorers, datasets or cases the engine cannot aggregate raises InvalidInput."""
    check_suite(facts.suite)
    evaluation_id = facts.body.get("evaluation_id")
    if type(evaluation_id) is not str:
        raise InvalidInput("the body has no evaluation_id")
    datasets = {
        digest: DatasetIndex(tuple(d.ids), tuple(d.tags)) for digest, d in facts.datasets.items()
    }
    score_ranges = {line.digest: _score_range(line) for line in facts.scorer_lines.values()}
    header = facts.header
    baseline_id = None if header is None else header.baseline_evaluation_id
    result = aggregate(
        AggregationInput(
            evaluation_id=evaluation_id,
            suite=facts.suite,
            datasets=datasets,
            score_ranges=score_ranges,
            cases=_columns(facts, "case", datasets),
            baseline_evaluation_id=baseline_id,
            baseline_cases=None
            if baseline_id is None
            else _columns(facts, "baseline_case", datasets),
            baseline_report_digest=_baseline_report_digest(facts.body),
            edition=edition_of(facts.body),
            look=_look(facts.body),
            labels=judged_label_columns(facts.suite, facts.labels["label"], datasets),
            baseline_labels=None
            if baseline_id is None
            else judged_label_columns(facts.suite, facts.labels["baseline_label"], datasets),
        )
    )
    if predates_case_trees(facts.body):
        _without_case_trees(result.body)
    compare_intervals = producer_matches({} if header is None else header.producer)
    legacy = predates_statistics(facts.body)
    if legacy:
        _without_statistics(result.body)
    found: list[str] = []
    for key, value in result.body.items():
        _differences(key, facts.body.get(key), value, compare_intervals, found)
    for difference in found:
        yield failure(last_line, "replay", difference)
    if found:
        return f"failed: {len(found)} differences"
    yield Proven("replay")
    note = "; issued before the statistics observations, which were not compared" if legacy else ""
    if compare_intervals:
        return f"matched (interval bounds to 1e-9){note}"
    return (
        "matched; interval bounds not compared (other producer versions than this verifier's)"
        + note
    )
