"""Schemathesis hooks: the rules of the HTTP contract that JSON Schema cannot state.

A schema can bound a number or a string, but it cannot say "a scorer of that name exists",
"no two examples share an id" or "lo < hi". For exactly these rules, and nothing else, the
generated bodies are mapped onto data that satisfies them (the test creates the definitions
named here first); everything a schema can say is in the OpenAPI document and generated
from it as it stands. Loaded by `schemathesis run` through SCHEMATHESIS_HOOKS.
"""

from __future__ import annotations

import uuid
from typing import Any

import schemathesis
from schemathesis.checks import CHECKS
from schemathesis.specs.openapi import checks as openapi_checks

MAX_SAFE = 2**53 - 1
# The definitions the OpenAPI examples name, which the test creates before the run.
KNOWN_SCORER = {"name": "exact-match", "version": "1"}
KNOWN_DATASET = {"name": "qa", "version": "1"}
KNOWN_EXAMPLES = 5
KNOWN_TAG = "lang:de"
KNOWN_SUITE = {"name": "rag-quality", "version": "1"}
KNOWN_CLUSTER_PREFIX = "cluster:"


def _positive(case: Any) -> bool:
    """Only data meant to be valid is mapped: negative cases keep their violations."""
    return case.meta is None or case.meta.generation.mode.is_positive


def ordered_score_range(body: Any) -> None:
    """score_range is [lo, hi] with lo < hi."""
    score_range = body.get("score_range") if isinstance(body, dict) else None
    if isinstance(score_range, list) and len(score_range) == 2:
        lo, hi = sorted(score_range)
        if lo == hi:
            lo, hi = (lo - 1, hi) if hi >= MAX_SAFE else (lo, hi + 1)
        body["score_range"] = [lo, hi]


def unique_example_ids(body: Any) -> None:
    """No two examples of a dataset version share an id."""
    examples = body.get("examples") if isinstance(body, dict) else None
    if isinstance(examples, list):
        for index, example in enumerate(examples):
            if isinstance(example, dict):
                example["id"] = f"e{index}"


def _known_kind(index: int, check: dict[str, Any]) -> None:
    """A measure check (not the first: it measures c0, a scored check) has no scorer, dataset
    or repeats and aggregates by quantile; a scored check takes neither quantile nor a
    relative margin."""
    aggregation = check.get("aggregation")
    if not isinstance(aggregation, dict):
        return
    if index > 0 and check.get("measure") is not None:
        check["measure"] = {"of": "c0", "name": "latency_ms"}
        for name in ("scorer", "dataset", "repeats"):
            check.pop(name, None)
        if aggregation.get("method") != "quantile":
            threshold = aggregation.get("threshold")
            aggregation.clear()
            aggregation.update(method="quantile", q=0.5, threshold=threshold or 0.0)
        return
    check.pop("measure", None)
    check["scorer"] = dict(KNOWN_SCORER)
    check["dataset"] = dict(KNOWN_DATASET)
    aggregation.pop("margin_relative", None)
    if aggregation.get("method") == "quantile":
        aggregation.clear()
        aggregation.update(method="mean", threshold=0.0)


def _known_calibration(check: dict[str, Any]) -> None:
    """A calibration only on a scored pass_rate or mean check with repeats 1 and no clusters,
    asking for every example (the known dataset has five), so that min_labels fits."""
    calibration = check.get("calibration")
    if not isinstance(calibration, dict):
        return
    groups = [check, *(check.get("slices") or [])]
    if (
        check.get("aggregation", {}).get("method") not in ("pass_rate", "mean")
        or check.get("measure") is not None
        or check.get("repeats", 1) != 1
        or any(g.get("cluster_tag_prefix") is not None for g in groups)
    ):
        check.pop("calibration")
        return
    calibration["label_fraction"] = 1.0
    given = calibration.get("min_labels")
    wanted = int(given) if isinstance(given, int | float) and given >= 2 else 2
    calibration["min_labels"] = min(wanted, KNOWN_EXAMPLES)


def _known_check(index: int, check: dict[str, Any]) -> None:
    check["check_id"] = f"c{index}"
    _known_kind(index, check)
    _known_calibration(check)
    check["min_samples"] = min(max(check.get("min_samples", 1), 1), KNOWN_EXAMPLES)
    method = check.get("aggregation", {}).get("method")
    _known_clusters(check, method)
    for slice_index, item in enumerate(check.get("slices") or []):
        item["name"] = f"s{slice_index}"
        item["tag"] = KNOWN_TAG
        _known_clusters(item, method)
        if method == "all_pass":
            item.pop("threshold", None)
        elif method == "pass_rate" and item.get("threshold") is not None:
            item["threshold"] = min(max(item["threshold"], 0.0), 1.0)
    # min_clusters only where some group of the check has clusters.
    groups = [check, *(check.get("slices") or [])]
    if not any(g.get("cluster_tag_prefix") is not None for g in groups):
        check.pop("min_clusters", None)


def _known_clusters(item: dict[str, Any], method: Any) -> None:
    """A cluster prefix only on pass_rate and mean, and one no example has two tags under."""
    if item.get("cluster_tag_prefix") is None:
        return
    if method in ("pass_rate", "mean") and "measure" not in item:
        item["cluster_tag_prefix"] = KNOWN_CLUSTER_PREFIX
    else:
        item.pop("cluster_tag_prefix")


def plans_that_fit_their_method(body: Any) -> None:
    """A pass rate and its target inside (0, 1); a standard deviation above 0; a correlation
    only for paired runs; an effect large enough to plan for."""
    if not isinstance(body, dict) or not isinstance(body.get("baseline"), int | float):
        return
    effect = body.get("effect")
    if not isinstance(effect, int | float):
        return
    if body.get("method") == "pass_rate":
        body["baseline"] = min(max(abs(body["baseline"]), 0.05), 0.95)
        room = 0.9 * (1 - body["baseline"] if effect > 0 else body["baseline"])
        body["effect"] = max(min(abs(effect), room), 0.01) * (1 if effect > 0 else -1)
    else:
        body["baseline"] = min(max(abs(body["baseline"]), 0.01), 1e6)
        body["effect"] = max(abs(effect), body["baseline"] / 1000) * (1 if effect > 0 else -1)
    if body.get("method") == "paired" and body.get("design") is not None:
        body["design"] = "paired"
    if body.get("method") != "paired" and body.get("design") != "paired":
        body.pop("correlation", None)
    # A design effect of 10^5 on an effect of sd/1000 asks for more than 10^12 examples.
    if isinstance(body.get("design_effect"), int | float):
        body["design_effect"] = min(max(body["design_effect"], 1.0), 100.0)
    # An alpha of 5e-324 or a power of 1 - 1e-16 asks for more examples than exist.
    if isinstance(body.get("alpha"), int | float):
        body["alpha"] = max(body["alpha"], 1e-4)
    if isinstance(body.get("power"), int | float):
        body["power"] = min(max(body["power"], 0.01), 0.9999)


def suites_of_known_definitions(body: Any) -> None:
    """Checks name a scorer and a dataset that exist, with ids, slice names and tags that
    fit them (unique ids and names, a tag some example carries, min_samples within the
    dataset, slice thresholds that fit the check's method); spending under a rule it acts on."""
    checks = body.get("checks") if isinstance(body, dict) else None
    # Spending only under a rule it can act on (threshold decides on the point estimate).
    if isinstance(body, dict) and body.get("reevaluation_spending") == "geometric":
        rule = body.get("decision_rule")
        if not isinstance(rule, dict) or rule.get("rule", "threshold") == "threshold":
            body["reevaluation_spending"] = "none"
    if isinstance(checks, list):
        for index, check in enumerate(checks):
            if isinstance(check, dict):
                _known_check(index, check)


def labeller_tokens_hold_what_they_may(body: Any) -> None:
    """A labeller token holds label.write, report.read and dataset.read_body at most (a 422
    by contract otherwise: it attests labels, never cases)."""
    if isinstance(body, dict) and body.get("kind") == "labeller":
        held = body.get("permissions")
        if isinstance(held, list):
            allowed = ("label.write", "report.read", "dataset.read_body")
            body["permissions"] = [p for p in held if p in allowed]


def evaluations_of_a_known_suite(body: Any) -> None:
    """The suite exists; its rule (threshold) compares with no baseline."""
    if isinstance(body, dict):
        body["suite"] = dict(KNOWN_SUITE)
        body.pop("baseline_evaluation_id", None)


def boards_of_the_known_suite(body: Any) -> None:
    """A board of the known suite version's check, over every subject with a current gate
    report (two, made before the run); a check or subject it does not have is a 422 by
    contract (tests/services/test_boards_api.py)."""
    if isinstance(body, dict):
        body.update(suite=KNOWN_SUITE["name"], version=KNOWN_SUITE["version"])
        body.update(check_id="accuracy", subjects=None)


def callbacks_the_service_may_call(body: Any) -> None:
    """A callback on a host the test's settings let the service call (never called: the
    served app delivers nothing); any other is refused before a connection by design."""
    if isinstance(body, dict):
        body["callback_url"] = "http://127.0.0.1:9/hooks"


def strict_ijson(value: Any) -> Any:
    """Free-form JSON (documented as `{}` with the rules in its description, decision 0025)
    made strict I-JSON: numbers within ±(2^53 - 1), no U+0000 in text or keys."""
    if isinstance(value, dict):
        return {k.replace("\x00", ""): strict_ijson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strict_ijson(v) for v in value]
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) > MAX_SAFE:
        return type(value)(MAX_SAFE if value > 0 else -MAX_SAFE)
    return value


MAPPINGS = {
    ("POST", "/api/v1/peers"): callbacks_the_service_may_call,
    ("PUT", "/api/v1/scorers/{name}/versions/{version}"): ordered_score_range,
    ("PUT", "/api/v1/datasets/{name}/versions/{version}"): unique_example_ids,
    ("PUT", "/api/v1/suites/{name}/versions/{version}"): suites_of_known_definitions,
    ("POST", "/api/v1/evaluations"): evaluations_of_a_known_suite,
    ("POST", "/api/v1/tokens"): labeller_tokens_hold_what_they_may,
    ("POST", "/evaluations/api/power"): plans_that_fit_their_method,
    ("POST", "/evaluations/api/boards"): boards_of_the_known_suite,
}


DIFFS = (
    "/evaluations/api/reports/{report_id}/diff/{other_id}",
    "/evaluations/api/reports/{report_id}/diff/{other_id}.ndjson",
)


def two_reports_and_paired_filters(case: Any) -> None:
    """A diff names two different reports, and pages a transition with `check` and
    `transition` together (a 422 by contract otherwise)."""
    params = case.path_parameters or {}
    if params.get("report_id") is not None and params.get("report_id") == params.get("other_id"):
        params["other_id"] = str(uuid.uuid4())
    query = case.query or {}
    if ("check" in query) != ("transition" in query):
        query.pop("check", None)
        query.pop("transition", None)


@schemathesis.hook
def map_case(ctx: Any, case: Any) -> Any:
    """Positive cases of the operations above get the data their unstatable rules ask for;
    an Idempotency-Key is made fresh (one reused with another body is a 422 by contract)."""
    if not _positive(case):
        return case
    if isinstance(case.body, dict | list):
        case.body = strict_ijson(case.body)
    mapping = MAPPINGS.get((case.operation.method.upper(), case.operation.path))
    if mapping is not None and case.body is not None:
        mapping(case.body)
    if case.operation.path in DIFFS:
        two_reports_and_paired_filters(case)
    if case.query:
        # A cursor is valid only as the service issued it (a `next_cursor`, carrying its
        # check): a generated string is a 400 by contract (docs/api.md, "Cursors").
        case.query.pop("cursor", None)
    if case.headers and "Idempotency-Key" in case.headers:
        case.headers["Idempotency-Key"] = uuid.uuid4().hex
    return case


@schemathesis.hook
def filter_case(ctx: Any, case: Any) -> bool:
    """The known scorer stays registered and unretired: the cases mapped above refer to it."""
    if case.operation.method.upper() != "DELETE" or not case.operation.path.startswith(
        "/api/v1/scorers/"
    ):
        return True
    params = case.path_parameters or {}
    return (params.get("name"), params.get("version")) != (
        KNOWN_SCORER["name"],
        KNOWN_SCORER["version"],
    )


_use_after_free = openapi_checks.use_after_free


def use_after_free(ctx: Any, response: Any, case: Any) -> bool | None:
    """Schemathesis's use-after-free check, except for scorer versions: DELETE retires one, and
    the contract keeps it readable (marked retired) for the reports that pinned it. (An
    operation's `checks.use_after_free.enabled = false` is not consulted by every phase.)"""
    if case.operation.path.startswith("/api/v1/scorers"):
        return None
    result: bool | None = _use_after_free(ctx, response, case)
    return result


CHECKS.unregister("use_after_free")
schemathesis.check(use_after_free)
