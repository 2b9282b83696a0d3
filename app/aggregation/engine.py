"""From cases to check results and a report result: docs/verdicts.md, sections 2 to 6."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from app.aggregation.clusters import cluster_bootstrap
from app.aggregation.compare import compare, comparison_of
from app.aggregation.explain import explain
from app.aggregation.groups import CheckGrid, GroupStats
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
from app.aggregation.judged import (
    Judging,
    calibration_body,
    judge,
    judge_comparison,
    judged_assurance,
    judged_observations,
    judging_of,
)
from app.aggregation.looks import Rules, rules_of
from app.aggregation.manifest import evidence
from app.aggregation.outcome import Outcome
from app.aggregation.robust import (
    DEFAULT_MIN_CLUSTERS,
    settle,
)
from app.aggregation.rounding import r12
from app.aggregation.stats import (
    adjust,
    bootstrap,
)
from app.aggregation.steps import (
    decided_step,
    decision,
    early_steps,
    score_and_interval,
    too_few_clusters,
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

# A measure check's evidence is its source check's: it lists none of its own.
NO_EVIDENCE = EvidenceList([], False)
INCONCLUSIVE_STATUSES = (*UNEXECUTED_STATUSES, "inconclusive")


def result_of(status: str) -> str:
    """docs/verdicts.md, section 3, status to result."""
    return "inconclusive" if status in INCONCLUSIVE_STATUSES else status


@dataclass
class CheckWork:
    """A check with its slices while the report is computed."""

    definition: dict[str, Any]
    # The scored check it reads (itself, unless it is a measure check).
    source: dict[str, Any]
    dataset: DatasetIndex
    cases: CaseColumns
    grid: CheckGrid
    outcome: Outcome
    slices: list[Outcome]
    # A judged check's labels on its examples (None: the check has no calibration).
    judging: Judging | None = None


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


def _source(inp: AggregationInput, definition: dict[str, Any]) -> dict[str, Any]:
    """The scored check whose cases, dataset, repeats and scorer a check reads: itself, or
    for a measure check the check it measures."""
    measure = definition.get("measure")
    if measure is None:
        return definition
    found: dict[str, Any] | None = next(
        (c for c in inp.suite["checks"] if c["check_id"] == measure["of"]), None
    )
    if found is None or "measure" in found:
        raise InvalidInput(f"check {definition['check_id']!r} measures no scored check")
    return found


def _cases_of(
    by_check: Mapping[str, CaseColumns], definition: dict[str, Any], source_id: str
) -> CaseColumns:
    """A check's cases; a measure check's are its source's, valued by the measure."""
    cases = by_check.get(source_id) or CaseColumns.empty()
    measure = definition.get("measure")
    return cases if measure is None else cases.measured(measure["name"])


def _dataset_of(inp: AggregationInput, check_id: str, source: dict[str, Any]) -> DatasetIndex:
    """The dataset a check's (source's) examples come from, which the input must hold."""
    digest = source["dataset"]["digest"]
    dataset = inp.datasets.get(digest)
    if dataset is None:
        raise InvalidInput(f"check {check_id!r} names dataset {digest}, which the input lacks")
    return dataset


def _baseline_grid(
    inp: AggregationInput, definition: dict[str, Any], source: dict[str, Any], dataset: DatasetIndex
) -> CheckGrid | None:
    """The baseline's cases of a compared check on its grid (None: no baseline given)."""
    if inp.baseline_cases is None:
        return None
    baseline_cases = _cases_of(inp.baseline_cases, definition, source["check_id"])
    return CheckGrid(baseline_cases, dataset.size, source["repeats"])


def _build(inp: AggregationInput, definition: dict[str, Any], rules: Rules) -> CheckWork:
    check_id = definition["check_id"]
    source = _source(inp, definition)
    dataset = _dataset_of(inp, check_id, source)
    aggregation = definition["aggregation"]
    method = aggregation["method"]
    repeats = source["repeats"]
    cases = _cases_of(inp.cases, definition, source["check_id"])
    grid = CheckGrid(cases, dataset.size, repeats)
    score_range = (
        None if source is not definition else inp.score_ranges.get(source["scorer"]["digest"])
    )
    comparative = rules.rule in COMPARATIVE_RULES and method in COMPARATIVE_METHODS
    baseline_grid = _baseline_grid(inp, definition, source, dataset) if comparative else None
    baseline_labels = None if inp.baseline_labels is None else inp.baseline_labels.get(check_id)
    judging = judging_of(definition, dataset, inp.labels.get(check_id), baseline_labels)

    def outcome_for(slice_def: dict[str, Any] | None) -> Outcome:
        mask = None if slice_def is None else dataset.tag_mask(slice_def["tag"])
        prefix = (definition if slice_def is None else slice_def).get("cluster_tag_prefix")
        outcome = Outcome(
            check_id=check_id,
            slice_name=None if slice_def is None else slice_def["name"],
            required=definition["required"] if slice_def is None else slice_def["required"],
            method=method,
            threshold=(aggregation if slice_def is None else slice_def).get("threshold"),
            stats=grid.group(method, mask),
            min_coverage=definition["min_coverage"],
            min_samples=definition["min_samples"],
            edition=rules.edition,
            min_clusters=definition.get("min_clusters", DEFAULT_MIN_CLUSTERS),
            bounds=_bounds(method, score_range, comparative),
            cluster_of=None if prefix is None else dataset.cluster_labels(prefix),
            lower_is_better=aggregation.get("better") == "lower",
            q=aggregation.get("q"),
            margin_relative=aggregation.get("margin_relative"),
            judged=judging is not None,
        )
        early_steps(outcome, rules.rule, score_range)
        baseline = None
        if comparative and baseline_grid is not None:
            baseline = baseline_grid.group(method, mask)
        _settle(outcome, (judging, baseline), rules, repeats, inp.evaluation_id, comparative)
        too_few_clusters(outcome)
        return outcome

    return CheckWork(
        definition=definition,
        source=source,
        dataset=dataset,
        cases=cases,
        grid=grid,
        outcome=outcome_for(None),
        slices=[outcome_for(s) for s in definition["slices"]],
        judging=judging,
    )


def _settle(
    outcome: Outcome,
    against: tuple[Judging | None, GroupStats | None],
    rules: Rules,
    repeats: int,
    evaluation_id: str,
    comparative: bool,
) -> None:
    """A group's score, interval and comparison: corrected by labels when judged, paired with
    the baseline's group when comparative, else from its own values."""
    judging, baseline = against
    if judging is not None and comparative:
        judge_comparison(outcome, judging, baseline, rules)
    elif judging is not None:
        judge(outcome, judging, rules.alpha)
    elif comparative:
        compare(outcome, baseline, rules, evaluation_id)
    else:
        score_and_interval(outcome, repeats, rules.alpha, evaluation_id)


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
            item.facts["decision"] = decision(item, rule, alpha)
        item.status, item.step = item.early or (item.facts.get("decision", ""), decided_step(item))
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
    check.facts["decision"] = decision(check, rule, alpha)
    check.status, check.step = check.facts["decision"], decided_step(check)
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
    if work.judging is not None:
        found.extend(judged_observations(work.outcome))
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
        listed = evidence(work.cases) if work.source is work.definition else NO_EVIDENCE
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
    coverage = check.stats.coverage
    calibration = None
    if work.judging is not None:
        assurance = judged_assurance(assurance, work.judging)
        coverage = dataclasses.replace(coverage, labels_missing=check.facts["labels_missing"])
        calibration = calibration_body(work.outcome, work.judging)
    comparison = None
    if check.comparative:
        # A measure check's baseline cases are those of the check it measures.
        baseline = _baseline_ref(inp, work.source["check_id"])
        comparison = comparison_of(check, inp.baseline_evaluation_id, rules.delta0, baseline)
    return CheckResult(
        check_id=check.check_id,
        required=check.required,
        status=check.status,
        result=result_of(check.status),
        aggregation=definition["aggregation"],
        scorer_ref=work.source["scorer"],
        measure=definition.get("measure"),
        assurance=ASSURANCE_LEVELS[assurance],
        evidence_refs=listed.refs,
        evidence_manifest=listed.is_manifest,
        score=check.score,
        interval=check.interval,
        comparison=comparison,
        explanation=explain(check, work.slices, rules.alpha),
        coverage=coverage,
        cases=cases_tree(work.cases),
        observations=_observations(work),
        slices=tuple(_slice_result(item, inp, rules) for item in work.slices),
        calibration=calibration,
    )
