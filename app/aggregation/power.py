"""Power: the minimum detectable effect of a check, "underpowered", and planning a run
(docs/verdicts.md, section 8).

The planner's sample sizes are those of `statsmodels.stats.power`: NormalIndPower for two
independent runs (and, with ratio 0, one run of pass rates against a threshold), TTestPower
for paired differences and one run of means; one-sided ("larger") or two-sided."""

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


def n_needed_clusters(clusters: int, se: float, distance: float, level: float) -> int | None:
    """Second edition, with clusters: the smallest G' whose own critical value detects
    `distance`, (t(G' - 1, level) + z(power)) * se * sqrt(G / G') <= distance. The t of the
    planned run, not of the observed one: planning from 30 clusters to 240 with t(29) would
    promise 80 % and deliver 83 %."""
    if distance <= 0.0:
        return None
    spread = se * math.sqrt(clusters)

    def detects(planned: int) -> bool:
        critical = float(special.stdtrit(planned - 1, level))
        return (critical + z(POWER)) * spread / math.sqrt(planned) <= distance

    # Between the normal answer (t > z) and the answer at the observed t (the planned run is
    # larger, so its t is smaller).
    low = max(2, math.floor((z(level) + z(POWER)) ** 2 * (spread / distance) ** 2))
    high = n_needed(
        clusters, (float(special.stdtrit(clusters - 1, level)) + z(POWER)) * se, distance
    )
    if high is None:
        return None
    high = max(high, low)
    if detects(low):
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if detects(middle):
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True)
class Plan:
    """A planned sample size and how it was computed."""

    n: int
    formula: str
    # The correlation of paired runs the answer assumed (None: not a paired plan of two runs).
    correlation: float | None = None


DESIGNS = ("one_sample", "two_runs", "paired")
ALTERNATIVES = ("larger", "two-sided")


def plan(
    method: str,
    baseline: float,
    effect: float,
    alpha: float,
    power: float,
    correlation: float | None = None,
    design_effect: float | None = None,
    *,
    design: str = "two_runs",
    alternative: str = "larger",
) -> Plan:
    """Examples needed to detect `effect` at `alpha` with `power`, for the run's design: one run
    against a threshold, two independent runs, or paired runs (`method` "paired" is paired)."""
    two_sided = alternative == "two-sided"
    sides = "two-sided" if two_sided else "one-sided"
    if method == "paired":
        design = "paired"
    elif design == "paired" and correlation is None:
        # Unstated, the conservative choice: runs no more alike than independent ones.
        correlation = 0.0
    if design != "paired":
        correlation = None
    if design == "paired":
        n, formula = _paired(
            method, baseline, effect, alpha, power, correlation, design_effect, sides
        )
    elif method == "pass_rate":
        n, formula = _pass_rates(baseline, effect, alpha, power, design, sides)
    elif design == "one_sample":
        n = _one_sample_t(abs(effect) / baseline, alpha, power, two_sided, exact=False)
        formula = (
            "the smallest n whose one-sample t-test of the mean (effect / sd) has the power "
            f"asked, one run against a threshold, {sides} (statsmodels TTestPower)"
        )
    else:
        n = 2.0 * _normal_n(abs(effect) / baseline, alpha, power, two_sided)
        formula = (
            "n per run = ((z + z(power)) * sd / effect)^2 * 2, two independent runs, "
            f"{sides} (statsmodels NormalIndPower)"
        )
    if design_effect is not None:
        n *= design_effect
        formula += ", times the design effect"
    if not n <= MAX_PLANNED:
        raise ValueError(f"the effect is too small to plan for: over {MAX_PLANNED:.0e} examples")
    # At least one example, however large the effect.
    return Plan(max(1, math.ceil(n - 1e-9)), formula, correlation)


def _paired(
    method: str,
    baseline: float,
    effect: float,
    alpha: float,
    power: float,
    correlation: float | None,
    design_effect: float | None,
    sides: str,
) -> tuple[float, str]:
    """Pairs needed, and the formula, for paired runs."""
    two_sided = sides == "two-sided"
    sd = math.sqrt(baseline * (1.0 - baseline)) if method == "pass_rate" else baseline
    if correlation is not None:
        sd *= math.sqrt(2.0 * (1.0 - correlation))
    n = _one_sample_t(abs(effect) / sd, alpha, power, two_sided, exact=design_effect is not None)
    formula = (
        "pairs: the smallest n whose one-sample t-test of the differences "
        "(effect / sd_d, sd_d = sd * sqrt(2 (1 - correlation)), the correlation 0 when none "
        "is given, or sd_d = sd for method paired without one; sd = sqrt(p (1 - p)) for a "
        f"pass rate) has the power asked, {sides} (statsmodels TTestPower)"
    )
    return n, formula


def _pass_rates(
    baseline: float, effect: float, alpha: float, power: float, design: str, sides: str
) -> tuple[float, str]:
    """Examples needed, and the formula, for a pass rate (Cohen's h)."""
    two_sided = sides == "two-sided"
    target = baseline + effect
    if not 0.0 <= target <= 1.0:
        raise ValueError("baseline + effect lies outside [0, 1]")
    h = abs(2.0 * math.asin(math.sqrt(target)) - 2.0 * math.asin(math.sqrt(baseline)))
    if design == "one_sample":
        n = _normal_n(h, alpha, power, two_sided)
        formula = (
            "n = ((z + z(power)) / h)^2, h = |2 asin(sqrt(p + effect)) - 2 asin(sqrt(p))|, "
            f"one run against a threshold, {sides} (Cohen's h; statsmodels NormalIndPower, "
            "ratio=0)"
        )
    else:
        n = 2.0 * _normal_n(h, alpha, power, two_sided)
        formula = (
            "n per run = ((z + z(power)) / h)^2 * 2, h = |2 asin(sqrt(p + effect)) - "
            f"2 asin(sqrt(p))|, two independent runs, {sides} (Cohen's h; statsmodels "
            "NormalIndPower)"
        )
    return n, formula


def _normal_power(effect_size: float, n: float, alpha: float, two_sided: bool) -> float:
    """statsmodels normal_power: the chance a z-test on `n` effective observations rejects."""
    shift = effect_size * math.sqrt(n)
    if two_sided:
        critical = z(1.0 - alpha / 2.0)
        return float(special.ndtr(shift - critical) + special.ndtr(-shift - critical))
    return float(special.ndtr(shift - z(1.0 - alpha)))


def _normal_n(effect_size: float, alpha: float, power: float, two_sided: bool) -> float:
    """Effective observations a z-test needs: ((z + z(power)) / es)^2, or for two sides the
    root of the power equation with both tails (a little below the one-tail answer)."""
    critical = z(1.0 - alpha / 2.0) if two_sided else z(1.0 - alpha)
    approximate = ((critical + z(power)) / effect_size) ** 2
    if not two_sided or not approximate <= MAX_PLANNED or power <= alpha or approximate < 1:
        # Fewer than one observation is one observation (the answer is a ceiling).
        return approximate

    def shortfall(n: float) -> float:
        return _normal_power(effect_size, n, alpha, True) - power

    low = approximate / 4.0
    if shortfall(low) >= 0:
        return low
    return float(optimize.brentq(shortfall, low, approximate, xtol=1e-12, rtol=1e-13))


def _one_sample_t(
    effect_size: float, alpha: float, power: float, two_sided: bool, exact: bool
) -> float:
    """Observations for a one-sample t-test (statsmodels TTestPower): the smallest integer
    with the power asked, or (`exact`) the real root of the power equation."""
    tail = alpha / 2.0 if two_sided else alpha

    def shortfall(n: float) -> float:
        # scipy.special directly: the same numbers as stats.t.isf and stats.nct.sf, 30x faster.
        df = n - 1.0
        critical = special.stdtrit(df, 1.0 - tail)
        noncentral = effect_size * math.sqrt(n)
        reached = 1.0 - float(special.nctdtr(df, noncentral, critical))
        if two_sided:
            reached += float(special.nctdtr(df, noncentral, -critical))
        return reached - power

    # The normal approximation is about the answer (the t's heavier tails add a little).
    approximate = _normal_n(effect_size, alpha, power, two_sided)
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
