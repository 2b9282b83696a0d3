"""A measure check read in its units, as the gate's summary and the pages say it: "latency
p95 1,840 ms <= 2,000 ms (interval 1,710-1,990)" (docs/verdicts.md, section 12)."""

from __future__ import annotations

import math
from typing import Any

import orjson

# A measure's unit from its name's last part (latency_ms, cost_usd, output_tokens).
UNITS = {"ms": "ms", "s": "s", "usd": "USD", "tokens": "tokens", "bytes": "bytes"}


def split_name(name: str) -> tuple[str, str]:
    """(what is measured, its unit) of a measure's name: latency_ms -> (latency, ms)."""
    head, _, tail = name.rpartition("_")
    if head and tail.lower() in UNITS:
        return head.replace("_", " "), UNITS[tail.lower()]
    return name.replace("_", " "), ""


def amount(value: float | None, unit: str = "") -> str:
    """A number as a person reads it: thousands separated, four significant digits below."""
    if value is None or not math.isfinite(value):
        return "—"
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return f"{text} {unit}" if unit else text


def statistic(aggregation: dict[str, Any]) -> str:
    """p95 of a 0.95 quantile, else the method (mean)."""
    q = aggregation.get("q")
    return f"p{q * 100:g}" if aggregation.get("method") == "quantile" and q else "mean"


def measures_shown(stored: str) -> list[tuple[str, str]]:
    """A case's stored measures (their canonical JSON) as (name, amount in its unit), by name."""
    found: dict[str, float] = orjson.loads(stored)
    return [(name, amount(value, split_name(name)[1])) for name, value in sorted(found.items())]


def measure_sentence(check: dict[str, Any]) -> str | None:
    """A measure check's score against its threshold in its units, or None for other checks."""
    measure = check.get("measure")
    if not isinstance(measure, dict) or check.get("score") is None:
        return None
    aggregation = check.get("aggregation") or {}
    what, unit = split_name(str(measure.get("name")))
    score = float(check["score"])
    lower = aggregation.get("better") == "lower"
    comparison = check.get("comparison")
    if comparison:
        return _compared(what, aggregation, score, comparison, lower)
    threshold = aggregation.get("threshold")
    if lower:
        relation = "≤" if threshold is None or score <= threshold else ">"
    else:
        relation = "≥" if threshold is None or score >= threshold else "<"
    bar = amount(threshold, unit)
    text = f"{what} {statistic(aggregation)} {amount(score, unit)} {relation} {bar}"
    interval = check.get("interval")
    if interval:
        # An end a quantile's sample is too small for is shown as "?".
        ends = [
            "?" if interval.get(end) is None else amount(interval.get(end))
            for end in ("lower", "upper")
        ]
        text += f" (interval {ends[0]}–{ends[1]})"
    return text


def _compared(
    what: str, aggregation: dict[str, Any], score: float, comparison: dict[str, Any], lower: bool
) -> str:
    """A compared measure: the ratio of the means under a relative margin, else the mean
    paired difference (a positive one an improvement)."""
    if comparison.get("method") == "paired_bootstrap_log_ratio":
        ratio = math.exp(-score if lower else score)
        margin = aggregation.get("margin_relative") or 0.0
        bound = f"at most {1 + margin:.2f}×" if lower else f"at least {1 / (1 + margin):.2f}×"
        return f"{what} {statistic(aggregation)} {ratio:.2f}× the baseline ({bound})"
    return f"{what} {statistic(aggregation)}: mean improvement {amount(score)} over the baseline"
