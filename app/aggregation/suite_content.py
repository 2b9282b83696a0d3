"""A frozen suite version's content as the engine reads it, written as types.

The service freezes every content it aggregates (app/services/freezing.py), so its contents
always conform. A bundle's suite line comes from outside: `check_suite` tells a content the
engine can aggregate from one of the wrong shape, which --replay reports as a finding rather
than meeting it as a KeyError deep in the engine. Fields the engine does not read (name,
version, validity_hours) are not required.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from app.aggregation.inputs import InvalidInput
from app.aggregation.robust import DEFAULT_MIN_CLUSTERS
from app.domain.vocabulary import Better, Correction, Rule

Probability = Annotated[float, Meta(ge=0.0, le=1.0)]
Count = Annotated[int, Meta(ge=1)]


class Pinned(Struct, frozen=True):
    """A scorer or dataset version the check pins."""

    name: str
    version: str
    digest: str


class AllPass(Struct, frozen=True, tag_field="method", tag="all_pass"):
    """Every example must pass."""


class PassRate(Struct, frozen=True, tag_field="method", tag="pass_rate"):
    """The share of passing examples against a threshold in [0, 1]."""

    threshold: Probability


class Mean(Struct, frozen=True, tag_field="method", tag="mean"):
    """The mean of the examples' scores against a threshold."""

    threshold: float
    better: Better = "higher"
    margin_relative: Annotated[float, Meta(gt=0.0)] | None = None


class Quantile(Struct, frozen=True, tag_field="method", tag="quantile"):
    """The q-quantile of a measure's example values against a threshold."""

    threshold: float
    q: Annotated[float, Meta(gt=0.0, lt=1.0)]
    better: Better = "higher"


class Measured(Struct, frozen=True):
    """What a measure check reads: a measure of the cases of another check."""

    of: str
    name: str


class Calibration(Struct, frozen=True):
    """A judged check's frozen calibration (docs/judges.md)."""

    method: Literal["ppi"]
    label_fraction: Annotated[float, Meta(gt=0.0, le=1.0)]
    min_labels: Annotated[int, Meta(ge=2)]
    sample_seed: Annotated[str, Meta(min_length=1, max_length=200)]


class Minimum(Struct, frozen=True, tag_field="method", tag="min"):
    """The lowest example score against a threshold."""

    threshold: float


class Slice(Struct, frozen=True):
    """A slice, frozen: its threshold written out (none for all_pass)."""

    name: str
    tag: str
    required: bool
    threshold: float | None = None
    cluster_tag_prefix: str | None = None


class Check(Struct, frozen=True):
    """A check, frozen: every default written out."""

    check_id: str
    required: bool
    aggregation: AllPass | PassRate | Mean | Minimum | Quantile
    min_coverage: Probability
    min_samples: Count
    slices: list[Slice]
    # A scored check pins these three; a measure check has `measure` instead.
    scorer: Pinned | None = None
    dataset: Pinned | None = None
    repeats: Annotated[int, Meta(ge=1, le=1000)] | None = None
    measure: Measured | None = None
    cluster_tag_prefix: str | None = None
    min_clusters: Annotated[int, Meta(ge=2)] = DEFAULT_MIN_CLUSTERS
    calibration: Calibration | None = None


class DecisionRule(Struct, frozen=True):
    """The suite's decision rule with its frozen comparison family."""

    rule: Rule
    alpha: Annotated[float, Meta(gt=0.0, le=0.5)]
    margin: Annotated[float, Meta(ge=0.0)]
    correction: Correction
    family: list[str] = []


class SuiteContent(Struct, frozen=True):
    """What the engine reads of a frozen suite version."""

    decision_rule: DecisionRule
    checks: Annotated[list[Check], Meta(min_length=1)]
    reevaluation_spending: Literal["none", "geometric"] = "none"


def check_suite(content: Mapping[str, Any]) -> None:
    """Raise InvalidInput, naming the field, when `content` is not a frozen suite content the
    engine can aggregate."""
    try:
        suite = msgspec.convert(content, SuiteContent)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"the suite content: {exc}") from None
    seen: set[str] = set()
    for check in suite.checks:
        if check.check_id in seen:
            raise InvalidInput(f"the suite content: a second check {check.check_id!r}")
        seen.add(check.check_id)
        _check_slices(check)
        _check_calibration(check)
    scored = {c.check_id for c in suite.checks if c.measure is None}
    for check in suite.checks:
        _check_kind(check, scored)


def _check_kind(check: Check, scored: set[str]) -> None:
    """A scored check pins a scorer, a dataset and repeats; a measure check reads a scored
    check of the same suite and aggregates by mean or quantile."""
    where = f"the suite content: check {check.check_id!r}"
    if check.measure is None:
        if check.scorer is None or check.dataset is None or check.repeats is None:
            raise InvalidInput(f"{where} needs scorer, dataset and repeats, or a measure")
        if isinstance(check.aggregation, Quantile) or (
            isinstance(check.aggregation, Mean) and check.aggregation.margin_relative is not None
        ):
            raise InvalidInput(f"{where}: quantile and margin_relative apply to measure checks")
        return
    if check.scorer is not None or check.dataset is not None or check.repeats is not None:
        raise InvalidInput(f"{where}: a measure check has no scorer, dataset or repeats")
    if check.measure.of not in scored:
        raise InvalidInput(f"{where} measures {check.measure.of!r}, no scored check of the suite")
    if not isinstance(check.aggregation, Mean | Quantile):
        raise InvalidInput(f"{where}: a measure check aggregates by mean or quantile")


def _check_calibration(check: Check) -> None:
    """Calibration only where PPI is defined: a pass_rate or mean check, repeats 1, no
    clusters."""
    if check.calibration is None:
        return
    clustered = check.cluster_tag_prefix is not None or any(
        item.cluster_tag_prefix is not None for item in check.slices
    )
    if not isinstance(check.aggregation, PassRate | Mean) or check.repeats != 1 or clustered:
        raise InvalidInput(
            f"the suite content: check {check.check_id!r} has a calibration, which applies to "
            "a pass_rate or mean check with repeats 1 and no clusters"
        )


def _check_slices(check: Check) -> None:
    """A slice's threshold is the check's kind of threshold; clusters need an interval."""
    method = check.aggregation
    clustered = check.cluster_tag_prefix is not None or any(
        item.cluster_tag_prefix is not None for item in check.slices
    )
    if clustered and not isinstance(method, PassRate | Mean):
        raise InvalidInput(
            f"the suite content: check {check.check_id!r} has clusters, which apply to "
            "pass_rate and mean only"
        )
    for item in check.slices:
        threshold = item.threshold
        if isinstance(method, AllPass):
            well_formed = threshold is None
        elif isinstance(method, PassRate):
            well_formed = threshold is not None and 0.0 <= threshold <= 1.0
        else:
            well_formed = threshold is not None
        if not well_formed:
            raise InvalidInput(
                f"the suite content: slice {item.name!r} of check {check.check_id!r} has "
                f"no threshold a {method.__struct_config__.tag} check takes"
            )
