"""What a bundle verification reports: failures, what was proven, what could not be."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class NotABundle(Exception):
    """The file is not a gzip-compressed v1 bundle at all."""


@dataclass(frozen=True)
class Failure:
    """One thing that did not verify."""

    line: int
    code: str
    what: str
    expected: str | None = None
    actual: str | None = None

    def __str__(self) -> str:
        text = f"line {self.line}: {self.code}: {self.what}"
        if self.expected is not None or self.actual is not None:
            text += f" (expected {self.expected}, actual {self.actual})"
        return text


@dataclass(frozen=True, slots=True)
class Proven:
    """What verified, counted under its code (`count` of them: a fast lane's run at once)."""

    code: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class NotProven:
    """Something the bundle cannot prove, and says so (counted under its reason)."""

    reason: str
    count: int = 1


Finding = Failure | Proven | NotProven


def failure(
    line_no: int, code: str, what: str, expected: Any = None, actual: Any = None
) -> Failure:
    """A failure, its expected and actual values written as text."""
    return Failure(
        line_no,
        code,
        what,
        None if expected is None else str(expected),
        None if actual is None else str(actual),
    )


def failure_documents(failures: Iterable[Failure]) -> list[dict[str, Any]]:
    """Failures as `--json` lists them."""
    return [
        {"line": f.line, "code": f.code, "what": f.what, "expected": f.expected, "actual": f.actual}
        for f in failures
    ]


def compared(line_no: int, code: str, what: str, expected: Any, actual: Any) -> Finding:
    """Proven when `expected` equals `actual`, else a failure naming both."""
    if expected == actual:
        return Proven(code)
    return failure(line_no, code, what, expected, actual)


@dataclass
class Outcome:
    """What a verification found."""

    lines: int = 0
    failures: list[Failure] = field(default_factory=list)
    proven: Counter[str] = field(default_factory=Counter)
    not_proven: Counter[str] = field(default_factory=Counter)
    replay: str = "not requested"
    report_id: str | None = None
    report_digest: str | None = None
    # {"keyid", "trusted"} of the key whose signature over the report verified
    signer: dict[str, object] | None = None
    # What the signed supersession statements prove of the report's status when exported.
    status: str = "not proven"
    # {"index", "tree_size", "trusted", "witnesses"} once the log entry is proven.
    log: dict[str, object] | None = None

    @property
    def ok(self) -> bool:
        """True when everything provable was proven."""
        return not self.failures


def record_findings(outcome: Outcome, findings: Iterable[Finding]) -> None:
    """Count what was proven and what cannot be, keep what failed (in order)."""
    for found in findings:
        if isinstance(found, Proven):
            outcome.proven[found.code] += found.count
        elif isinstance(found, NotProven):
            outcome.not_proven[found.reason] += found.count
        else:
            outcome.failures.append(found)


def recorded(outcome: Outcome, findings: Generator[Finding, None, T]) -> T:
    """Record a generator's findings in `outcome` and return what it returns."""
    while True:
        try:
            found = next(findings)
        except StopIteration as stop:
            returned: T = stop.value
            return returned
        record_findings(outcome, (found,))
