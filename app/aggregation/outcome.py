"""A check or one of its slices while the engine decides it (docs/verdicts.md, section 3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.aggregation.groups import GroupStats
from app.aggregation.robust import RobustError
from app.aggregation.rounding import FIRST_EDITION, THIRD_EDITION, Moments, moments
from app.domain.results import Interval


@dataclass
class Outcome:
    """A check or one of its slices, as it moves through the status steps."""

    check_id: str
    slice_name: str | None
    required: bool
    method: str
    threshold: float | None
    stats: GroupStats
    min_coverage: float
    min_samples: int
    # The statistics rules in force (app.aggregation.rounding): 1 replays an older report.
    edition: int = FIRST_EDITION
    min_clusters: int = 2
    # The range the score (or a paired difference) can take, for clipping intervals.
    bounds: tuple[float, float] | None = None
    # `better: lower`: the check passes at or below its threshold, every rule mirrored.
    lower_is_better: bool = False
    # A quantile check's q; a relative margin of a measure check's comparison.
    q: float | None = None
    margin_relative: float | None = None
    # A judged check (docs/judges.md): its score is corrected by labels, never "already failed"
    # on the judge's own values.
    judged: bool = False
    score: float | None = None
    interval: Interval | None = None
    # (values, seed, cluster labels or None) of a bootstrap still to draw; drawn for all
    # groups at once, in threads.
    resample: tuple[NDArray[np.float64], int, NDArray[np.int64] | None] | None = None
    # Per dataset example, its cluster (None: the check names no cluster_tag_prefix).
    cluster_of: NDArray[np.int64] | None = None
    # The values the score is the mean of (examples' values, or paired differences), and
    # their clusters.
    sample: NDArray[np.float64] | None = None
    clusters: NDArray[np.int64] | None = None
    # The clustered standard errors of the second edition (None: no clusters, or too few).
    robust: RobustError | None = None
    comparative: bool = False
    pairs: int = 0
    unpaired: int = 0
    p_value: float = 1.0
    p_adjusted: float = 1.0
    evaluable: bool = False
    family_size: int = 1
    # Whether the family's correction divides alpha (any `correction` but `none`).
    corrected: bool = True
    early: tuple[str, str] | None = None
    already_failed: bool = False
    status: str = "inconclusive"
    step: str = "decision"
    facts: dict[str, Any] = field(default_factory=dict)
    _moments: Moments | None = None

    @property
    def name(self) -> str:
        """`check_id` or `check_id/slice`, as the comparison family names it."""
        return self.check_id if self.slice_name is None else f"{self.check_id}/{self.slice_name}"

    @property
    def second_edition(self) -> bool:
        """Whether the amendments of docs/verdicts.md, section 10, apply."""
        return self.edition > FIRST_EDITION

    @property
    def third_edition(self) -> bool:
        """Whether the amendments of docs/verdicts.md, section 11, apply."""
        return self.edition >= THIRD_EDITION

    def moments(self) -> Moments:
        """The sample's correctly rounded mean and squared deviations (computed once)."""
        if self._moments is None:
            assert self.sample is not None, "no sample yet"
            self._moments = moments(self.sample)
        return self._moments
