"""Judged checks (docs/judges.md, section 3): a check scored by an imperfect judge, corrected by
human labels on a random sample of its examples with PPI++. The check (or slice) keeps its early
steps; its score, interval and comparison are the corrected ones, and a sample short of labels
is inconclusive (too_few_labels) or incomplete (labels_missing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from app.aggregation.agreement import agreement
from app.aggregation.compare import paired_examples
from app.aggregation.groups import GroupStats
from app.aggregation.inputs import DatasetIndex, InvalidInput, LabelColumns
from app.aggregation.ppi import PPI_METHOD, PPIEstimate, ppi_mean
from app.aggregation.rounding import r12
from app.aggregation.stats import level_of
from app.domain.results import Interval, Observation

if TYPE_CHECKING:
    from app.aggregation.looks import Rules
    from app.aggregation.outcome import Outcome

TOO_FEW_LABELS = "too_few_labels"


@dataclass(frozen=True)
class Judging:
    """A judged check's labels laid on its examples: its frozen `calibration`, which examples
    are in the label sample, each example's label (NaN: none), the baseline's, the weakest
    label's assurance code and the labels tree's root."""

    calibration: dict[str, Any]
    sampled: NDArray[np.bool_]
    labels: NDArray[np.float64]
    baseline_labels: NDArray[np.float64] | None
    assurance: int | None
    root: str
    # The baseline's labels tree root, when a comparison reads the baseline's labels.
    baseline_root: str | None = None

    @property
    def min_labels(self) -> int:
        """Fewer counting labels than this: too_few_labels."""
        return int(self.calibration["min_labels"])


def _laid_out(
    labels: LabelColumns, dataset: DatasetIndex, sampled: NDArray[np.bool_], check_id: str
) -> NDArray[np.float64]:
    """Each example's label (NaN where none); a label off the dataset, outside the sample or
    sent twice is an input the engine refuses."""
    index = labels.example_index.astype(np.int64)
    if index.size and (index.min() < 0 or index.max() >= dataset.size):
        raise InvalidInput(f"a label of check {check_id!r} lies outside its examples")
    if not sampled[index].all():
        raise InvalidInput(f"a label of check {check_id!r} is on an example outside its sample")
    if np.unique(index).size != index.size:
        raise InvalidInput(f"two labels of check {check_id!r} are on one example")
    laid = np.full(dataset.size, np.nan)
    laid[index] = labels.value
    return laid


def judging_of(
    definition: dict[str, Any],
    dataset: DatasetIndex,
    labels: LabelColumns | None,
    baseline: LabelColumns | None,
) -> Judging | None:
    """A check's labels on its examples, or None for a check without `calibration`."""
    calibration = definition.get("calibration")
    if calibration is None:
        return None
    check_id = definition["check_id"]
    sampled = dataset.label_sample(
        calibration["sample_seed"], check_id, calibration["label_fraction"]
    )
    own = labels or LabelColumns.empty()
    theirs = None if baseline is None else _laid_out(baseline, dataset, sampled, check_id)
    return Judging(
        calibration=calibration,
        sampled=sampled,
        labels=_laid_out(own, dataset, sampled, check_id),
        baseline_labels=theirs,
        assurance=int(own.assurance.min()) if own.size else None,
        root=own.root,
        baseline_root=None if baseline is None else baseline.root,
    )


def _clipped(estimate: PPIEstimate, alpha: float, bounds: tuple[float, float] | None) -> Interval:
    """The PPI interval, clipped to the range the score can take, rounded."""
    lower, upper = estimate.interval(alpha)
    if bounds is not None:
        lower, upper = max(bounds[0], lower), min(bounds[1], upper)
    return Interval(
        PPI_METHOD,
        level_of(alpha),
        r12(lower),
        r12(upper),
        lam=r12(estimate.lam),
        labelled=estimate.labelled,
        unlabelled=estimate.unlabelled,
    )


def _estimate(
    labels: NDArray[np.float64], judged: NDArray[np.float64]
) -> tuple[PPIEstimate | None, int]:
    """PPI++ over examples with a label (`labels` not NaN) and without; None under 2 labels."""
    has = ~np.isnan(labels)
    count = int(has.sum())
    if count < 2:
        return None, count
    return ppi_mean(labels[has], judged[has], judged[~has]), count


def _short_of_labels(outcome: Outcome, count: int, minimum: int) -> None:
    """Fewer counting labels than the minimum: inconclusive, unless an early step settled it."""
    outcome.facts["labels"] = {"n": count, "min": minimum}
    if count < minimum and outcome.early is None:
        outcome.early = ("inconclusive", TOO_FEW_LABELS)


def _label_facts(outcome: Outcome, judging: Judging) -> NDArray[np.float64]:
    """The labels of the group's executed examples; how many sampled ones lack a label, and
    the judge's own (uncorrected) score."""
    stats = outcome.stats
    index = stats.executed_index
    labels = judging.labels[index]
    outcome.facts["labels_missing"] = int((judging.sampled[index] & np.isnan(labels)).sum())
    outcome.facts["judge_score"] = r12(float(stats.values.mean())) if index.size else None
    # The judge's own values are not the sample the corrected score is the mean of.
    outcome.sample = None
    return labels


def judge(outcome: Outcome, judging: Judging, alpha: float) -> None:
    """A judged group's corrected score and interval, and what its labels leave missing."""
    stats = outcome.stats
    labels = _label_facts(outcome, judging)
    estimate, count = _estimate(labels, stats.values)
    _short_of_labels(outcome, count, judging.min_labels)
    if estimate is None:
        return
    outcome.facts["ppi"] = estimate
    outcome.score = r12(estimate.theta)
    outcome.interval = _clipped(estimate, alpha, outcome.bounds)


def judge_comparison(
    outcome: Outcome, judging: Judging, baseline: GroupStats | None, rules: Rules
) -> None:
    """Paired PPI on the differences: labels where both runs hold one, the judge's difference
    on every pair; the one-sided p of the z statistic against delta0."""
    outcome.comparative = True
    outcome.facts["delta0"] = rules.delta0
    _label_facts(outcome, judging)
    paired_index, candidate, base = paired_examples(outcome, baseline)
    sign = -1.0 if outcome.lower_is_better else 1.0
    judged = sign * (candidate - base)
    outcome.pairs = int(judged.size)
    baseline_labels = (
        judging.baseline_labels
        if judging.baseline_labels is not None
        else np.full(judging.labels.size, np.nan)
    )
    differences = sign * (judging.labels[paired_index] - baseline_labels[paired_index])
    estimate, count = _estimate(differences, judged)
    _short_of_labels(outcome, count, judging.min_labels)
    outcome.evaluable = (
        outcome.early is None
        and judged.size >= max(2, outcome.min_samples)
        and estimate is not None
    )
    outcome.p_value = 1.0
    if estimate is None:
        return
    outcome.facts["ppi"] = estimate
    outcome.score = r12(estimate.theta)
    outcome.interval = _clipped(estimate, rules.alpha, outcome.bounds)
    if outcome.evaluable:
        outcome.p_value = r12(estimate.p_larger(rules.delta0))


def judged_assurance(cases: int, judging: Judging) -> int:
    """A judged check's assurance code: the weakest of its cases' and its counting labels'."""
    return cases if judging.assurance is None else min(cases, judging.assurance)


def judged_observations(outcome: Outcome) -> list[Observation]:
    """judge_bias: the corrected interval excludes the judge's own score."""
    judge_score = outcome.facts.get("judge_score")
    interval = outcome.interval
    if outcome.comparative or judge_score is None or interval is None or interval.lam is None:
        return []
    lower, upper = interval.ends
    if lower <= judge_score <= upper:
        return []
    return [Observation("judge_bias", detail={"judge_score": judge_score, "score": outcome.score})]


def calibration_body(outcome: Outcome, judging: Judging) -> dict[str, Any]:
    """The check's `calibration` in the body: the frozen declaration; how many executed
    examples were labelled and not, λ, the judge's score and agreement; the labels' root."""
    stats = outcome.stats
    labels = judging.labels[stats.executed_index]
    has = ~np.isnan(labels)
    labelled = int(has.sum())
    estimate = outcome.facts.get("ppi")
    bound = {} if judging.baseline_root is None else {"baseline_labels_root": judging.baseline_root}
    return {
        **bound,
        **judging.calibration,
        "labelled": labelled,
        "unlabelled": int(stats.executed_index.size) - labelled,
        "lambda": None if estimate is None else r12(estimate.lam),
        "judge_score": outcome.facts.get("judge_score"),
        "agreement": agreement(outcome.method, stats.values[has], labels[has]),
        "labels_root": judging.root,
    }
