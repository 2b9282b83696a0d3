"""Power: the minimum detectable effect of a check, "underpowered", and planning a run
(docs/verdicts.md, section 8).

The planner's sample sizes are those of `statsmodels.stats.power` (NormalIndPower for two
independent proportions or means, TTestPower for paired differences), for a one-sided test."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import optimize, special

POWER = 0.8
# Beyond this many examples a plan means "not detectable in practice"; it also keeps the answer
# an exact JSON integer.
MAX_PLANNED = 1e12


def z(p: float) -> float:
    """The standard normal quantile."""
    return float(special.ndtri(p))


def mde(se: float, alpha: float, power: float = POWER) -> float:
    """The minimum detectable effect of a one-sided test at `alpha`: (z(1-a) + z(power)) se."""
    return (z(1.0 - alpha) + z(power)) * se


def n_needed(n: int, mde_value: float, distance: float) -> int | None:
    """The examples (or clusters) that would detect `distance` at the observed variance:
    ceil(n (mde / distance)^2); None when the distance is 0 or the answer beyond 10^12 (no
    practical number of examples would)."""
    if distance <= 0.0:
        return None
    needed = n * (mde_value / distance) ** 2
    if not needed <= MAX_PLANNED:
        return None
    return math.ceil(needed - 1e-9)


@dataclass(frozen=True)
class Plan:
    """A planned sample size and how it was computed."""

    n: int
    formula: str


def plan(
    method: str,
    baseline: float,
    effect: float,
    alpha: float,
    power: float,
    correlation: float | None = None,
    design_effect: float | None = None,
) -> Plan:
    """Examples needed to detect `effect` (one-sided, at `alpha`, with `power`)."""
    if method == "pass_rate":
        target = baseline + effect
        if not 0.0 <= target <= 1.0:
            raise ValueError("baseline + effect lies outside [0, 1]")
        h = abs(2.0 * math.asin(math.sqrt(target)) - 2.0 * math.asin(math.sqrt(baseline)))
        n = _normal_ind(h, alpha, power)
        formula = (
            "n per run = ((z(1-alpha) + z(power)) / h)^2 * 2, h = |2 asin(sqrt(p + effect)) - "
            "2 asin(sqrt(p))| (Cohen's h; statsmodels NormalIndPower, one-sided)"
        )
    elif method == "mean":
        n = _normal_ind(abs(effect) / baseline, alpha, power)
        formula = (
            "n per run = ((z(1-alpha) + z(power)) * sd / effect)^2 * 2 "
            "(statsmodels NormalIndPower, one-sided)"
        )
    else:
        sd = baseline if correlation is None else baseline * math.sqrt(2.0 * (1.0 - correlation))
        n = _paired_t(abs(effect) / sd, alpha, power, exact=design_effect is not None)
        formula = (
            "pairs: the smallest n whose one-sided one-sample t-test of the differences "
            "(effect / sd_d, sd_d = sd * sqrt(2 (1 - correlation)) when a correlation is "
            "given) has the power asked (statsmodels TTestPower)"
        )
    if design_effect is not None:
        n *= design_effect
        formula += ", times the design effect"
    if not n <= MAX_PLANNED:
        raise ValueError(f"the effect is too small to plan for: over {MAX_PLANNED:.0e} examples")
    return Plan(math.ceil(n - 1e-9), formula)


def _normal_ind(effect_size: float, alpha: float, power: float) -> float:
    # statsmodels NormalIndPower (ratio 1, alternative "larger"): power = Phi(h sqrt(n/2) - z).
    return 2.0 * ((z(1.0 - alpha) + z(power)) / effect_size) ** 2


def _paired_t(effect_size: float, alpha: float, power: float, exact: bool) -> float:
    """Pairs for a one-sided one-sample t-test (statsmodels TTestPower): the smallest integer
    with the power asked, or (`exact`) the real root of the power equation."""

    def shortfall(n: float) -> float:
        # scipy.special directly: the same numbers as stats.t.isf and stats.nct.sf, 30x faster.
        df = n - 1.0
        critical = special.stdtrit(df, 1.0 - alpha)
        return 1.0 - float(special.nctdtr(df, effect_size * math.sqrt(n), critical)) - power

    # The normal approximation is about the answer (the t's heavier tails add a little).
    approximate = _normal_ind(effect_size, alpha, power) / 2.0
    if not approximate <= MAX_PLANNED:
        return math.inf
    # Bracket the smallest sufficient integer n in (low, high], then bisect.
    high = max(2, math.ceil(approximate))
    low = 1
    if shortfall(high) < 0:
        low, high = high, high + max(1, high // 20)
        while shortfall(high) < 0:
            low, high = high, high + max(1, high // 20)
    while high - low > 1:
        middle = (low + high) // 2
        if middle >= 2 and shortfall(middle) >= 0:
            high = middle
        else:
            low = middle
    n = high
    if not exact or n == 2:
        return float(n)
    return float(optimize.brentq(shortfall, n - 1.0, float(n), xtol=1e-10))
