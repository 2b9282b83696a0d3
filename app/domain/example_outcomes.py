"""An example's own outcome in one check, from its repeats: what a person asks first on an
example's page, apart from the check's result over every example."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SCORED = ("pass", "fail")


@dataclass(frozen=True)
class ExampleOutcome:
    """pass, fail, flaky, error or missing, and the counts behind it."""

    outcome: str
    passed: int
    failed: int
    unexecuted: int

    @property
    def repeats(self) -> int:
        """Every repeat with a case."""
        return self.passed + self.failed + self.unexecuted

    def sentence(self) -> str:
        """The outcome in words, with its counts."""
        n = self.repeats
        if self.outcome == "missing":
            return "no case of this example was recorded"
        if self.outcome == "pass":
            return "passed every repeat" if n > 1 else "passed"
        if self.outcome == "fail":
            return f"failed all {n} repeats" if n > 1 else "failed"
        if self.outcome == "flaky":
            return (
                f"flaky: passed {self.passed} of {n} repeats and failed {self.failed} (a "
                "comparison counts it as failed)"
            )
        return (
            f"not executed in {self.unexecuted} of {n} repeat{'s' if n != 1 else ''} "
            "(an error, a timeout or another reason it did not run)"
        )


def example_outcome(statuses: Iterable[str]) -> ExampleOutcome:
    """The outcome of one example from its repeats' case statuses: pass when every repeat
    passed, fail when every one failed, flaky when it passed some and failed others, error when
    a repeat was not executed, missing with no case."""
    seen = list(statuses)
    passed = sum(1 for s in seen if s == "pass")
    failed = sum(1 for s in seen if s == "fail")
    unexecuted = len(seen) - passed - failed
    if not seen:
        outcome = "missing"
    elif unexecuted:
        outcome = "error"
    elif failed and passed:
        outcome = "flaky"
    elif failed:
        outcome = "fail"
    else:
        outcome = "pass"
    return ExampleOutcome(outcome, passed, failed, unexecuted)
