"""Planning a run's size, from assumptions or from a report's observed variance."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from app.aggregation.power import n_needed
from app.aggregation.power import plan as plan_size
from app.domain.errors import NotFound, validation_error
from app.identity.auth import Principal
from app.platform.db import ReadConnection
from app.schemas.power import PowerIn, PowerOut, ReportPowerOut
from app.services import reports


def plan_run(body: PowerIn) -> PowerOut:
    """Examples needed to detect `body.effect` (statsmodels' formulas)."""
    if body.effect == 0:
        raise validation_error(("body", "effect"), "an effect of 0 cannot be detected")
    if body.method == "pass_rate" and not 0.0 < body.baseline < 1.0:
        raise validation_error(("body", "baseline"), "a pass rate strictly between 0 and 1")
    if body.method != "pass_rate" and body.baseline <= 0:
        raise validation_error(("body", "baseline"), "a standard deviation above 0")
    design = body.design or ("paired" if body.method == "paired" else "two_runs")
    if body.method == "paired" and design != "paired":
        raise validation_error(("body", "design"), "method paired is the paired design")
    if body.correlation is not None and design != "paired":
        raise validation_error(("body", "correlation"), "only for the paired design")
    try:
        planned = plan_size(
            body.method,
            body.baseline,
            body.effect,
            body.alpha,
            body.power,
            body.correlation,
            body.design_effect,
            design=design,
            alternative=body.alternative,
        )
    except ValueError as exc:
        raise validation_error(("body", "effect"), str(exc)) from exc
    return PowerOut(n=planned.n, formula=planned.formula, correlation=planned.correlation)


async def report_power(
    reader: ReadConnection, principal: Principal, report_id: uuid.UUID, check: str, effect: float
) -> ReportPowerOut:
    """Examples a check (`check_id` or `check_id/slice`) would need to detect `effect` at the
    variance the report observed."""
    if effect == 0:
        raise validation_error(("query", "effect"), "an effect of 0 cannot be detected")
    report = await reports.read(reader, principal, report_id)
    body = orjson.loads(report.body)
    check_id, _, slice_name = check.partition("/")
    group, observations = _observed_group(body, check_id, slice_name)
    found = next((o for o in observations if o["code"] == "mde"), None)
    if found is None:
        raise validation_error(
            ("query", "check"), "this check has no variance estimate (no interval, or < 2 values)"
        )
    detail = found["detail"]
    rule = body["decision_rule"]["rule"]
    clusters = next((o["count"] for o in observations if o["code"] == "clusters"), None)
    comparison = group.get("comparison")
    observed = clusters or (comparison["pairs"] if comparison else group["coverage"]["executed"])
    return ReportPowerOut(
        report_id=str(report_id),
        check=check,
        effect=effect,
        alpha=detail["alpha"],
        power=detail["power"],
        se=detail["se"],
        observed_n=observed,
        clustered=clusters is not None,
        n=n_needed(observed, detail["mde"], abs(effect)) if detail["se"] > 0 else 1,
        formula=_report_formula(detail, clusters is not None),
        design="paired" if comparison else "one_sample",
        alternative="two-sided" if rule == "interval" and not comparison else "larger",
    )


def _observed_group(
    body: dict[str, Any], check_id: str, slice_name: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The check (or its slice) a power question names, and the observations about it."""
    result = next((c for c in body.get("checks", []) if c["check_id"] == check_id), None)
    if result is None:
        raise NotFound(f"the report has no check {check_id}")
    observations = [
        o for o in result.get("observations", []) if o.get("slice") == (slice_name or None)
    ]
    if not slice_name:
        return result, observations
    group = next((s for s in result.get("slices", []) if s["name"] == slice_name), None)
    if group is None:
        raise NotFound(f"check {check_id} has no slice {slice_name}")
    return group, observations


def _report_formula(detail: dict[str, Any], clustered: bool) -> str:
    """How n follows from the report's MDE (the second edition names the critical value)."""
    if "critical" not in detail:
        return "n = ceil(n_observed * (mde / effect)^2), mde = (z(1-alpha) + z(power)) * se"
    quantile = "t(G - 1)" if clustered else "z"
    return (
        "n = ceil(n_observed * (mde / effect)^2), mde = (q + z(power)) * se, q the critical "
        f"value of the check's own decision ({quantile}: {detail['critical']})"
    )
