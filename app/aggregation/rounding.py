"""Numbers a decision can be replayed on (docs/verdicts.md, section 10.1): correctly rounded
sums, then 12 significant decimal digits before a number is written or compared with a bar."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

SIGNIFICANT_DIGITS = 12
# The statistics rules a report was issued under: 1 before the amendments of section 10 (its
# body names no edition), 2 from them on, 3 from section 11 on (`decision_rule.edition`).
FIRST_EDITION = 1
SECOND_EDITION = 2
# Section 11: the cluster jackknife (CV3), the Wilson hull of a clustered pass rate,
# too_few_clusters after the other steps, alpha / m only in a corrected family.
THIRD_EDITION = 3


def r12(value: float) -> float:
    """`value` rounded to 12 significant decimal digits (`float(f"{x:.12g}")`)."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


@dataclass(frozen=True)
class Moments:
    """A sample's size, mean and sum of squared deviations, each from a correctly rounded sum."""

    n: int
    mean: float
    squared_deviations: float
    # The correctly rounded sum of the values.
    total: float = 0.0

    @property
    def constant(self) -> bool:
        """Every value equal: no variance, so no standard error worth showing."""
        return self.squared_deviations == 0.0

    @property
    def sd(self) -> float:
        """The sample standard deviation (ddof 1); 0 with fewer than 2 values."""
        if self.n < 2:
            return 0.0
        return math.sqrt(self.squared_deviations / (self.n - 1))

    @property
    def se(self) -> float | None:
        """sd / sqrt(n): the standard error of the mean of independent values (None: n < 2)."""
        return None if self.n < 2 else self.sd / math.sqrt(self.n)


def moments(values: NDArray[np.float64]) -> Moments:
    """Mean and squared deviations by `math.fsum`; pass/fail (0/1) values by exact counts."""
    n = int(values.size)
    if n == 0:
        return Moments(0, math.nan, 0.0, 0.0)
    ones = int(np.count_nonzero(values == 1.0))
    zeros = int(np.count_nonzero(values == 0.0))
    if ones + zeros == n:
        # Integer arithmetic, then one correctly rounded division each.
        return Moments(n, ones / n, ones * zeros / n, float(ones))
    if bool(np.all(values == values[0])):
        return Moments(n, float(values[0]), 0.0, math.fsum(values))
    total = math.fsum(values)
    mean = total / n
    return Moments(n, mean, math.fsum((values - mean) ** 2), total)
