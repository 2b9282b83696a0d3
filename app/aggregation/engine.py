"""From cases to check results and a report result: docs/verdicts.md, sections 2 to 6."""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from app.aggregation.clusters import cluster_bootstrap
from app.aggregation.compare import compare, comparison_of
from app.aggregation.explain import explain
from app.aggregation.groups import CheckGrid
from app.aggregation.inputs import (
    ASSURANCE_LEVELS,
    FAIL,
    PASS,
    REASONS,
    AggregationInput,
    CaseColumns,
    DatasetIndex,
    EvidenceList,
    InvalidInput,
)
from app.aggregation.insights import group_observations, repeat_observations, weigh_power
from app.aggregation.looks import Rules, rules_of
from app.aggregation.manifest import evidence
from app.aggregation.outcome import Outcome
from app.aggregation.robust import (
    DEFAULT_MIN_CLUSTERS,
    cluster_count,
    clustered_error,
    hull_interval,
    robust_interval,
    settle,
)
from app.aggregation.rounding import r12
from app.aggregation.stats import (
    adjust,
    bootstrap,
    bootstrap_seed,
    wilson,
)
from app.aggregation.suite_content import check_suite
from app.aggregation.verdict import Verdict
from app.digest.merkle import hex_digest, root, split_leaves
from app.domain.results import (
    BaselineRef,
    CasesTree,
    CheckResult,
    Interval,
    Observation,
    ReportResult,
    SliceResult,
)
from app.domain.vocabulary import (
    COMPARATIVE_METHODS,
    COMPARATIVE_RULES,
    PASS_FAIL_METHODS,
    UNEXECUTED_STATUSES,
)

INCONCLUSIVE_STATUSES = (*UNEXECUTED_STATUSES, "inconclusive")


def result_of(status: str) -> str:
    """docs/verdicts.md, section 3, status to result."""
    return "inconclusive" if status in INCONCLUSIVE_STATUSES else status


def _score_and_interval(outcome: Outcome, repeats: int, alpha: float, evaluation_id: str) -> None:
    stats = outcome.stats
    if stats.executed == 0:
        return
    values = stats.values
    seed = bootstrap_seed(evaluation_id, outcome.check_id, outcome.slice_name)
    second = outcome.second_edition
    if outcome.method == "min":
        lowest = float(values.min())
        outcome.score = r12(lowest) if second else lowest
        return
    outcome.sample = values
    outcome.score = r12(outcome.moments().mean) if second else float(values.mean())
    if outcome.cluster_of is not None:
        outcome.clusters = outcome.cluster_of[stats.executed_index]
        if not second:
            outcome.resample = (values, seed, outcome.clusters)
            return
        outcome.robust = clustered_error(
            values, outcome.clusters, outcome.moments(), outcome.third_edition
        )
        if outcome.robust is not None:
            outcome.interval = robust_interval(outcome.score, outcome.robust, alpha, outcome.bounds)
            if outcome.third_edition and outcome.method == "pass_rate":
                outcome.interval = hull_interval(
                    outcome.interval, outcome.robust, int(values.size), outcome.score, alpha
                )
    elif outcome.method in PASS_FAIL_METHODS and repeats == 1:
        interval = wilson(stats.passes, stats.executed, alpha)
        outcome.interval = settle(interval, outcome.score) if second else interval
    else:
        outcome.resample = (values, seed, None)


def _too_few_clusters(outcome: Outcome) -> None:
    """Second edition: a clustered group with fewer than `min_clusters` clusters cannot tell.
    Third: that is decided after every other early step (an outage stays an error)."""
    if not outcome.second_edition or outcome.clusters is None or outcome.clusters.size == 0:
        return
    settled = ("missing", "already_failed")
    if outcome.early is not None and (outcome.third_edition or outcome.early[1] in settled):
        return
    count = cluster_count(outcome.clusters)
    outcome.facts["clusters"] = count
    if count < outcome.min_clusters:
        outcome.early = ("inconclusive", "too_few_clusters")
        outcome.evaluable = False
        outcome.p_value = 1.0


def _already_failed(outcome: Outcome, rule: str, score_range: tuple[float, float] | None) -> bool:
    stats = outcome.stats
    threshold = outcome.threshold
    if outcome.method == "all_pass":
        return stats.any_scored_fail
    if outcome.method == "min":
        lowest = stats.min_scored_score
        if outcome.second_edition and math.isfinite(lowest):
            lowest = r12(lowest)
        return threshold is not None and lowest < threshold
    if rule != "threshold" or threshold is None:
        return False
    if outcome.method == "pass_rate":
        best_missing = float(stats.unexecuted)
    elif score_range is None:
        return False
    else:
        best_missing = stats.unexecuted * score_range[1]
    if outcome.second_edition:
        # The sample the score will be the mean of: its sum is computed once, here.
        outcome.sample = stats.values
        total = outcome.moments().total if stats.values.size else 0.0
        best = r12((total + best_missing) / stats.expected)
    else:
        best = (float(stats.values.sum()) + best_missing) / stats.expected
    outcome.facts["best_possible"] = best
    return best < threshold


def _not_enough_evidence(outcome: Outcome) -> str | None:
    stats = outcome.stats
    if stats.expected and (
        stats.executed / stats.expected < outcome.min_coverage
        or stats.executed < outcome.min_samples
    ):
        reason = stats.dominant_reason()
        return "inconclusive" if reason in (None, "pending") else reason
    return None


def _early_steps(outcome: Outcome, rule: str, score_range: tuple[float, float] | None) -> None:
    """Steps 1, 2 and 4 on the group's own data (step 3 needs the slices)."""
    if not outcome.stats.has_case:
        outcome.early = ("missing", "missing")
        return
    if _already_failed(outcome, rule, score_range):
        outcome.already_failed = True
        outcome.early = ("fail", "already_failed")
        return
    status = _not_enough_evidence(outcome)
    if status is not None:
        outcome.early = (status, "not_enough_evidence")


def _decision(outcome: Outcome, rule: str, alpha: float) -> str:
    if outcome.comparative:
        if not outcome.evaluable:
            return "inconclusive"
        return "pass" if outcome.p_adjusted < alpha else "fail"
    threshold = outcome.threshold
    if outcome.method == "all_pass" or threshold is None:
        return "pass"
    assert outcome.score is not None
    if rule == "interval" and outcome.method in COMPARATIVE_METHODS and outcome.interval:
        outcome.facts["by_interval"] = True
        if outcome.interval.lower >= threshold:
            return "pass"
        return "fail" if outcome.interval.upper < threshold else "inconclusive"
    return "pass" if outcome.score >= threshold else "fail"


@dataclass
class CheckWork:
    """A check with its slices while the report is computed."""

    definition: dict[str, Any]
    dataset: DatasetIndex
    cases: CaseColumns
    grid: CheckGrid
    outcome: Outcome
    slices: list[Outcome]


def _bounds(
    method: str, score_range: tuple[float, float] | None, comparative: bool
) -> tuple[float, float] | None:
    """The range a score (or, comparing, a paired difference) can take."""
    if method == "pass_rate":
        low, high = 0.0, 1.0
    elif score_range is not None:
        low, high = score_range
    else:
        return None
    return (low - high, high - low) if comparative else (low, high)


def _build(inp: AggregationInput, definition: dict[str, Any], rules: Rules) -> CheckWork:
    check_id = definition["check_id"]
    digest = definition["dataset"]["digest"]
    dataset = inp.datasets.get(digest)
    if dataset is None:
        raise InvalidInput(f"check {check_id!r} names dataset {digest}, which the input lacks")
    method = definition["aggregation"]["method"]
    repeats = definition["repeats"]
    cases = inp.cases.get(check_id) or CaseColumns.empty()
    grid = CheckGrid(cases, dataset.size, repeats)
    score_range = inp.score_ranges.get(definition["scorer"]["digest"])
    comparative = rules.rule in COMPARATIVE_RULES and method in COMPARATIVE_METHODS
    baseline_grid = None
    if comparative and inp.baseline_cases is not None:
        baseline_cases = inp.baseline_cases.get(check_id) or CaseColumns.empty()
        baseline_grid = CheckGrid(baseline_cases, dataset.size, repeats)

    def outcome_for(slice_def: dict[str, Any] | None) -> Outcome:
        mask = None if slice_def is None else dataset.tag_mask(slice_def["tag"])
        prefix = (definition if slice_def is None else slice_def).get("cluster_tag_prefix")
        outcome = Outcome(
            check_id=check_id,
            slice_name=None if slice_def is None else slice_def["name"],
            required=definition["required"] if slice_def is None else slice_def["required"],
            method=method,
            threshold=(definition["aggregation"] if slice_def is None else slice_def).get(
                "threshold"
            ),
            stats=grid.group(method, mask),
            min_coverage=definition["min_coverage"],
            min_samples=definition["min_samples"],
            edition=rules.edition,
            min_clusters=definition.get("min_clusters", DEFAULT_MIN_CLUSTERS),
            bounds=_bounds(method, score_range, comparative),
            cluster_of=None if prefix is None else dataset.cluster_labels(prefix),
        )
        _early_steps(outcome, rules.rule, score_range)
        if comparative:
            baseline = None if baseline_grid is None else baseline_grid.group(method, mask)
            compare(outcome, baseline, rules.alpha, rules.delta0, inp.evaluation_id)
        else:
            _score_and_interval(outcome, repeats, rules.alpha, inp.evaluation_id)
        _too_few_clusters(outcome)
        return outcome

    return CheckWork(
        definition=definition,
        dataset=dataset,
        cases=cases,
        grid=grid,
        outcome=outcome_for(None),
        slices=[outcome_for(s) for s in definition["slices"]],
    )


def _draw_bootstraps(works: list[CheckWork], alpha: float) -> None:
    """Every pending bootstrap, drawn in threads (numpy releases the GIL while it draws).

    Each has its own seeded generator, so the intervals do not depend on the scheduling.
    """
    pending = [o for w in works for o in (w.outcome, *w.slices) if o.resample is not None]

    def draw(outcome: Outcome) -> Interval:
        assert outcome.resample is not None
        values, seed, clusters = outcome.resample
        if clusters is not None:
            return cluster_bootstrap(values, clusters, alpha, seed)
        interval = bootstrap(values, alpha, seed)
        if outcome.second_edition and outcome.score is not None:
            return settle(interval, outcome.score)
        return interval

    with ThreadPoolExecutor(max_workers=min(len(pending), os.cpu_count() or 1) or 1) as pool:
        for outcome, interval in zip(pending, pool.map(draw, pending), strict=True):
            outcome.interval = interval
            outcome.resample = None


def _apply_family(works: list[CheckWork], decision_rule: dict[str, Any]) -> None:
    family: list[str] = list(decision_rule.get("family", []))
    outcomes = {o.name: o for w in works for o in (w.outcome, *w.slices) if o.comparative}
    for outcome in outcomes.values():
        outcome.p_adjusted = outcome.p_value
    members = [outcomes.get(name) for name in family]
    adjusted = adjust(
        [m.p_value if m is not None else 1.0 for m in members], decision_rule["correction"]
    )
    for member, p_adjusted in zip(members, adjusted, strict=True):
        if member is not None:
            member.p_adjusted = r12(p_adjusted) if member.second_edition else p_adjusted
            member.family_size = len(family)
            member.corrected = decision_rule["correction"] != "none"


def _finish_statuses(work: CheckWork, rule: str, alpha: float) -> None:
    """Each slice's status, then the check's: an early status (missing, already failed) first,
    then a required slice's failure, then its own decision held back by a required slice."""
    for item in work.slices:
        if item.early is None:
            item.facts["decision"] = _decision(item, rule, alpha)
        item.status, item.step = item.early or (item.facts.get("decision", ""), "decision")
    _check_status(work, rule, alpha)


def _check_status(work: CheckWork, rule: str, alpha: float) -> None:
    check = work.outcome
    if check.early is not None and check.early[1] in ("missing", "already_failed"):
        check.status, check.step = check.early
        return
    failed = next((s for s in work.slices if s.required and s.status == "fail"), None)
    if failed is not None:
        check.status, check.step = "fail", "required_slice_failed"
        check.facts["slice"] = failed.name
        return
    if check.early is not None:
        check.status, check.step = check.early
        return
    check.facts["decision"] = _decision(check, rule, alpha)
    check.status, check.step = check.facts["decision"], "decision"
    if check.status == "pass":
        lagging = next((s for s in work.slices if s.required and s.status != "pass"), None)
        if lagging is not None:
            check.status, check.step = lagging.status, "required_slice_not_passed"
            check.facts["slice"] = lagging.name


def _observations(work: CheckWork) -> tuple[Observation, ...]:
    stats = work.outcome.stats
    found = [
        Observation(f"unexecuted_{reason}", count=int(count))
        for reason, count in zip(REASONS, stats.reason_counts, strict=True)
        if count
    ]
    if stats.stale_cases:
        found.append(Observation("stale_cases", count=stats.stale_cases))
    if work.outcome.method in PASS_FAIL_METHODS:
        cases = work.cases
        ignored = int(
            (((cases.status == PASS) | (cases.status == FAIL)) & ~np.isnan(cases.score)).sum()
        )
        if ignored:
            found.append(Observation("score_ignored", count=ignored))
    if work.outcome.unpaired:
        found.append(Observation("unpaired", count=work.outcome.unpaired))
    found.extend(repeat_observations(work.grid, work.dataset, work.outcome.method))
    for item in (work.outcome, *work.slices):
        found.extend(group_observations(item))
    return tuple(found)


@dataclass(frozen=True)
class Aggregate:
    """The engine's result, plus the evidence manifests to store."""

    results: ReportResult
    # Per check whose evidence list is a manifest: that list (its stored form by `.stored()`).
    manifests: dict[str, EvidenceList]

    @cached_property
    def body(self) -> dict[str, Any]:
        """The engine's keys of the report body (made once)."""
        return self.results.as_body()


def cases_tree(cases: CaseColumns) -> CasesTree:
    """A check's cases tree as the body gives it: how many leaves, and the RFC 6962 root."""
    if cases.root is not None:
        top = cases.root
    elif len(cases.leaves) == 32 * cases.size:
        top = root(split_leaves(cases.leaves))
    else:
        raise ValueError("a leaf hash per case, or the tree's root, is needed for the cases tree")
    return CasesTree(cases.size, hex_digest(top))


def aggregate(inp: AggregationInput) -> Aggregate:
    """Aggregate an evaluation: check results in suite order, result, reasons, coverage.

    An input the engine cannot aggregate raises InvalidInput; any other exception is a bug."""
    check_suite(inp.suite)
    decision_rule = dict(inp.suite["decision_rule"])
    rules = rules_of(inp, decision_rule)
    rule, alpha = rules.rule, rules.alpha
    works = [_build(inp, d, rules) for d in inp.suite["checks"]]
    _draw_bootstraps(works, alpha)
    _apply_family(works, decision_rule)
    checks: list[CheckResult] = []
    manifests: dict[str, EvidenceList] = {}
    verdict = Verdict()
    for work in works:
        _finish_statuses(work, rule, alpha)
        for item in (work.outcome, *work.slices):
            weigh_power(item, rule, rules.power_alpha)
        listed = evidence(work.cases)
        if listed.is_manifest:
            manifests[work.outcome.check_id] = listed
        result = _check_result(inp, work, rules, listed)
        checks.append(result)
        if work.outcome.required:
            verdict.count(work.outcome, result)
    return Aggregate(
        results=ReportResult(
            decision_rule=decision_rule,
            result=verdict.result(),
            assurance=ASSURANCE_LEVELS[min(verdict.assurances) if verdict.assurances else 0],
            evidence_complete=verdict.complete,
            reasons=tuple(verdict.reasons),
            checks=tuple(checks),
            coverage=verdict.coverage,
        ),
        manifests=manifests,
    )


def _slice_result(item: Outcome, inp: AggregationInput, rules: Rules) -> SliceResult:
    assert item.slice_name is not None
    return SliceResult(
        name=item.slice_name,
        required=item.required,
        status=item.status,
        result=result_of(item.status),
        score=item.score,
        interval=item.interval,
        comparison=comparison_of(item, inp.baseline_evaluation_id, rules.delta0),
        coverage=item.stats.coverage,
    )


def _baseline_ref(inp: AggregationInput, check_id: str) -> BaselineRef:
    tree = None
    if inp.baseline_cases is not None:
        tree = cases_tree(inp.baseline_cases.get(check_id) or CaseColumns.empty())
    return BaselineRef(tree, inp.baseline_report_digest)


def _check_result(
    inp: AggregationInput, work: CheckWork, rules: Rules, listed: EvidenceList
) -> CheckResult:
    """A check's result: status, score, interval, comparison, slices, evidence."""
    check = work.outcome
    definition = work.definition
    assurance = check.stats.assurance if check.stats.assurance is not None else 0
    comparison = None
    if check.comparative:
        baseline = _baseline_ref(inp, check.check_id)
        comparison = comparison_of(check, inp.baseline_evaluation_id, rules.delta0, baseline)
    return CheckResult(
        check_id=check.check_id,
        required=check.required,
        status=check.status,
        result=result_of(check.status),
        aggregation=definition["aggregation"],
        scorer_ref=definition["scorer"],
        assurance=ASSURANCE_LEVELS[assurance],
        evidence_refs=listed.refs,
        evidence_manifest=listed.is_manifest,
        score=check.score,
        interval=check.interval,
        comparison=comparison,
        explanation=explain(check, work.slices, rules.alpha),
        coverage=check.stats.coverage,
        cases=cases_tree(work.cases),
        observations=_observations(work),
        slices=tuple(_slice_result(item, inp, rules) for item in work.slices),
    )
