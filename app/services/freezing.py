"""Freezing a suite version: defaults written, references resolved to their digests, cluster
prefixes checked, the comparison family frozen (docs/verdicts.md, section 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import validation_error
from app.domain.vocabulary import COMPARATIVE_METHODS, COMPARATIVE_RULES
from app.identity.auth import Principal
from app.repositories import definitions as repo
from app.schemas.definitions import CheckIn, SliceIn, SuiteVersionIn


def _frozen_aggregation(check: CheckIn) -> dict[str, Any]:
    """The check's aggregation with its defaults settled; `better` and the measure fields
    written only when they say something, so suites without them freeze as before."""
    given = check.aggregation
    aggregation: dict[str, Any] = {"method": given.method}
    if given.method != "all_pass":
        aggregation["threshold"] = given.threshold
    if given.method == "quantile":
        aggregation["q"] = given.q
    if given.method in ("mean", "quantile") and given.better == "lower":
        aggregation["better"] = "lower"
    if given.method == "mean" and given.margin_relative is not None:
        aggregation["margin_relative"] = given.margin_relative
    return aggregation


async def _freeze_check(
    session: AsyncSession,
    principal: Principal,
    index: int,
    check: CheckIn,
    suite: SuiteVersionIn,
) -> dict[str, Any]:
    loc: tuple[str | int, ...] = ("body", "checks", index)
    if check.measure is not None:
        measured = _measured_check(loc, check, suite)
        scorer, dataset = await _pinned(session, principal, loc, measured, check.min_samples)
    else:
        scorer, dataset = await _pinned(session, principal, loc, check, check.min_samples)
    tags_present: set[str] = set()
    example_tags = await repo.example_index(session, dataset.id)
    for _, tags in example_tags:
        tags_present.update(tags)
    method = check.aggregation.method
    _check_clusters(loc, method, check.cluster_tag_prefix, example_tags)
    aggregation = _frozen_aggregation(check)
    slices: list[dict[str, Any]] = []
    names: set[str] = set()
    for slice_index, item in enumerate(check.slices):
        slice_loc = (*loc, "slices", slice_index)
        if item.name in names:
            raise validation_error((*slice_loc, "name"), f"duplicate slice name {item.name!r}")
        names.add(item.name)
        if item.tag not in tags_present:
            raise validation_error((*slice_loc, "tag"), f"no example carries the tag {item.tag!r}")
        slices.append(_freeze_slice(slice_loc, check, item, example_tags))
    frozen_check: dict[str, Any] = {"check_id": check.check_id, "required": check.required}
    frozen_check.update(_what_it_reads(check, scorer, dataset))
    frozen_check.update(
        aggregation=aggregation,
        min_coverage=check.min_coverage,
        min_samples=check.min_samples,
        slices=slices,
    )
    # Written only when set, so a suite without clusters freezes (and digests) as before.
    if check.cluster_tag_prefix is not None:
        frozen_check["cluster_tag_prefix"] = check.cluster_tag_prefix
    clustered = check.cluster_tag_prefix is not None or any(
        item.cluster_tag_prefix is not None for item in check.slices
    )
    if check.min_clusters is not None and not clustered:
        raise validation_error(
            (*loc, "min_clusters"), "min_clusters applies to a check or slice with clusters"
        )
    # Written only when sent: a clustered suite frozen before it digests as it did; the engine
    # reads an absent min_clusters as the default, 5.
    if check.min_clusters is not None:
        frozen_check["min_clusters"] = check.min_clusters
    if check.calibration is not None:
        frozen_check["calibration"] = _frozen_calibration(loc, check, dataset)
    return frozen_check


def _frozen_calibration(loc: tuple[str | int, ...], check: CheckIn, dataset: Any) -> dict[str, Any]:
    """A judged check's calibration with its defaults written out; refused when the sample's
    expected size is below min_labels (the check could never be decided)."""
    given = check.calibration
    assert given is not None
    expected = given.label_fraction * dataset.example_count
    if expected < given.min_labels:
        raise validation_error(
            (*loc, "calibration", "label_fraction"),
            f"label_fraction {given.label_fraction} of {dataset.example_count} examples expects "
            f"{expected:g} labels, below min_labels {given.min_labels}",
        )
    return {
        "method": given.method,
        "label_fraction": given.label_fraction,
        "min_labels": given.min_labels,
        "sample_seed": given.sample_seed if given.sample_seed is not None else dataset.name,
    }


def _what_it_reads(check: CheckIn, scorer: Any, dataset: Any) -> dict[str, Any]:
    """A scored check's pinned scorer, dataset and repeats; a measure check's measure."""
    if check.measure is not None:
        return {"measure": {"of": check.measure.of, "name": check.measure.name}}
    return {
        "scorer": {"name": scorer.name, "version": scorer.version, "digest": scorer.digest},
        "dataset": {"name": dataset.name, "version": dataset.version, "digest": dataset.digest},
        "repeats": check.repeats,
    }


def _measured_check(loc: tuple[str | int, ...], check: CheckIn, suite: SuiteVersionIn) -> CheckIn:
    """The check a measure check reads: in the suite version, and no measure check itself."""
    assert check.measure is not None
    of = next((c for c in suite.checks if c.check_id == check.measure.of), None)
    if of is None:
        raise validation_error(
            (*loc, "measure", "of"), f"no check {check.measure.of!r} in this suite version"
        )
    if of.measure is not None:
        raise validation_error(
            (*loc, "measure", "of"),
            f"{check.measure.of!r} is a measure check; a measure is read from a scored check",
        )
    compared = (
        suite.decision_rule.rule in COMPARATIVE_RULES
        and check.aggregation.method in COMPARATIVE_METHODS
    )
    if compared and of.aggregation.method not in COMPARATIVE_METHODS:
        # The baseline's measures are its cases of `of`, which are bundled and proven only
        # where `of` is compared too.
        raise validation_error(
            (*loc, "measure", "of"),
            f"a compared measure reads a compared check; {check.measure.of!r} aggregates "
            f"by {of.aggregation.method}, which {suite.decision_rule.rule} does not compare",
        )
    return of


async def _pinned(
    session: AsyncSession,
    principal: Principal,
    loc: tuple[str | int, ...],
    check: CheckIn,
    min_samples: int,
) -> tuple[Any, Any]:
    """The check's scorer and dataset versions, known, not retired, with enough examples."""
    assert check.scorer is not None and check.dataset is not None
    scorer = await repo.get_scorer(
        session, principal.project_id, check.scorer.name, check.scorer.version
    )
    if scorer is None:
        raise validation_error(
            (*loc, "scorer"), f"unknown scorer {check.scorer.name} version {check.scorer.version}"
        )
    if scorer.retired_at is not None:
        raise validation_error((*loc, "scorer"), "that scorer version is retired")
    dataset = await repo.get_dataset(
        session, principal.project_id, check.dataset.name, check.dataset.version
    )
    if dataset is None:
        raise validation_error(
            (*loc, "dataset"),
            f"unknown dataset {check.dataset.name} version {check.dataset.version}",
        )
    if dataset.example_count < min_samples:
        raise validation_error(
            (*loc, "min_samples"),
            f"the dataset has {dataset.example_count} examples, fewer than min_samples",
        )
    return scorer, dataset


def _freeze_slice(
    slice_loc: tuple[str | int, ...],
    check: CheckIn,
    item: SliceIn,
    example_tags: Sequence[tuple[str, Sequence[str]]],
) -> dict[str, Any]:
    """One slice frozen: its threshold written out and its cluster prefix inherited."""
    method = check.aggregation.method
    frozen: dict[str, Any] = {"name": item.name, "tag": item.tag, "required": item.required}
    prefix = item.cluster_tag_prefix or check.cluster_tag_prefix
    if item.cluster_tag_prefix is not None:
        _check_clusters(slice_loc, method, item.cluster_tag_prefix, example_tags)
    if prefix is not None:
        frozen["cluster_tag_prefix"] = prefix
    if method == "all_pass":
        if item.threshold is not None:
            raise validation_error((*slice_loc, "threshold"), "all_pass takes no threshold")
        return frozen
    threshold = item.threshold if item.threshold is not None else check.aggregation.threshold
    if method == "pass_rate" and not 0.0 <= (threshold or 0.0) <= 1.0:
        raise validation_error((*slice_loc, "threshold"), "a pass_rate threshold lies in [0, 1]")
    frozen["threshold"] = threshold
    return frozen


def _check_clusters(
    loc: tuple[str | int, ...],
    method: str,
    prefix: str | None,
    example_tags: Sequence[tuple[str, Sequence[str]]],
) -> None:
    """A cluster prefix needs an interval (pass_rate, mean); no example may be in two clusters."""
    if prefix is None:
        return
    if method not in ("pass_rate", "mean"):
        raise validation_error(
            (*loc, "cluster_tag_prefix"), f"clusters apply to pass_rate and mean, not {method}"
        )
    for example_id, tags in example_tags:
        if sum(1 for t in tags if t.startswith(prefix)) > 1:
            raise validation_error(
                (*loc, "cluster_tag_prefix"),
                f"example {example_id} has two tags starting with {prefix!r}",
            )


def comparison_family(rule: str, checks: list[dict[str, Any]]) -> list[str]:
    """Every required comparison a comparative suite can make, frozen at creation."""
    if rule not in COMPARATIVE_RULES:
        return []
    family: list[str] = []
    for check in checks:
        if not check["required"] or check["aggregation"]["method"] not in COMPARATIVE_METHODS:
            continue
        family.append(check["check_id"])
        family.extend(f"{check['check_id']}/{s['name']}" for s in check["slices"] if s["required"])
    return family


async def freeze_suite_content(
    session: AsyncSession, principal: Principal, name: str, version: str, body: SuiteVersionIn
) -> dict[str, Any]:
    """Normalize a suite version: defaults written, references resolved, family frozen."""
    seen: set[str] = set()
    checks: list[dict[str, Any]] = []
    for index, check in enumerate(body.checks):
        if check.check_id in seen:
            raise validation_error(
                ("body", "checks", index, "check_id"), f"duplicate check id {check.check_id!r}"
            )
        seen.add(check.check_id)
        checks.append(await _freeze_check(session, principal, index, check, body))
    rule = body.decision_rule
    return {
        "name": name,
        "version": version,
        "validity_hours": body.validity_hours,
        "decision_rule": {
            "rule": rule.rule,
            "alpha": rule.alpha,
            "margin": rule.margin,
            "correction": rule.correction,
            "family": comparison_family(rule.rule, checks),
        },
        "checks": checks,
        # Written only when it spends, so other suites freeze (and digest) as before.
        **(
            {"reevaluation_spending": body.reevaluation_spending}
            if body.reevaluation_spending != "none"
            else {}
        ),
    }
