"""A frozen suite version compiled for validating cases: its checks, their scorers and the
positions of their examples."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.domain.vocabulary import Method

SCORED_METHODS = ("mean", "min")


@dataclass(frozen=True)
class CompiledCheck:
    """What validating a case of one check needs."""

    check_id: str
    method: Method
    repeats: int
    scorer_name: str
    pinned_version: str
    pinned_digest: str
    dataset_version_id: uuid.UUID
    # Example id -> position in the dataset version (id byte order).
    example_positions: Mapping[str, int]

    @property
    def needs_score(self) -> bool:
        """mean and min checks aggregate scores; pass/fail checks count passes."""
        return self.method in SCORED_METHODS

    @property
    def expected_cases(self) -> int:
        """Examples times repeats."""
        return len(self.example_positions) * self.repeats


@dataclass(frozen=True)
class CompiledSuite:
    """A frozen suite version with its checks in definition order."""

    suite_version_id: uuid.UUID
    content: dict[str, Any]
    checks: dict[str, CompiledCheck]

    @property
    def expected_cases(self) -> int:
        """Every (check, example, repeat) the evaluation expects."""
        return sum(check.expected_cases for check in self.checks.values())

    @property
    def scorer_names(self) -> list[str]:
        """The scorers the checks pin, each once."""
        return sorted({check.scorer_name for check in self.checks.values()})


def scored_checks(content: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A frozen suite content's checks that have cases of their own (a measure check reads the
    cases of the check it measures, and pins no scorer or dataset)."""
    return [check for check in content["checks"] if "measure" not in check]
