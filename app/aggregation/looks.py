"""The decision rule a report is computed under: its edition, and the alpha of this look at a
subject when the suite spends alpha over re-evaluations (docs/verdicts.md, section 10.6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.aggregation.inputs import AggregationInput
from app.aggregation.rounding import FIRST_EDITION, SECOND_EDITION, THIRD_EDITION, r12

# Each look spends this share of what the previous one left: 0.8 a, 0.16 a, 0.032 a ...
SPENDING_RATIO = 0.2
SPENDING_POLICIES = ("none", "geometric")


@dataclass(frozen=True)
class Rules:
    """What every group of a report is decided with."""

    rule: str
    alpha: float
    delta0: float
    edition: int
    # The alpha the MDE and n_needed are computed at: the next look's under spending, from the
    # third edition; otherwise the decision's.
    planning_alpha: float | None = None

    @property
    def power_alpha(self) -> float:
        """The alpha of the MDE and of the examples a run would need."""
        return self.alpha if self.planning_alpha is None else self.planning_alpha


def alpha_spent(alpha: float, look: int) -> float:
    """alpha_k = alpha (1 - r) r^(k - 1), r = 0.2, rounded to 12 significant digits."""
    if look < 1:
        raise ValueError("looks count from 1")
    return r12(alpha * (1.0 - SPENDING_RATIO) * SPENDING_RATIO ** (look - 1))


def rules_of(inp: AggregationInput, decision_rule: dict[str, Any]) -> Rules:
    """The rules in force, written back into the body's `decision_rule` (edition, look)."""
    rule, alpha, margin = decision_rule["rule"], decision_rule["alpha"], decision_rule["margin"]
    delta0 = -margin if rule == "non_inferiority" else margin
    if inp.edition == FIRST_EDITION:
        return Rules(rule, alpha, delta0, FIRST_EDITION)
    edition = THIRD_EDITION if inp.edition >= THIRD_EDITION else SECOND_EDITION
    decision_rule["edition"] = edition
    planned = None
    if inp.suite.get("reevaluation_spending", "none") == "geometric" and inp.look is not None:
        decision_rule["look"] = inp.look
        decision_rule["alpha_spent"] = alpha_spent(alpha, inp.look)
        if edition >= THIRD_EDITION:
            planned = decision_rule["alpha_next"] = alpha_spent(alpha, inp.look + 1)
        alpha = decision_rule["alpha_spent"]
    return Rules(rule, alpha, delta0, edition, planned)
