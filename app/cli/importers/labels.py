"""Human labels a tool's run carries (docs/importing.md, "Human labels"): spooled while the run
is read, checked once every check's kind is known, and sent for the examples each judged
check's sample holds; labels of examples outside the sample are counted, never sent."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from app.cli.importers.source import Record, SourceError, Value, identifier
from app.domain.labels import in_sample


@dataclass
class LabelSpool:
    """Every label of the run's first repeat, as read, and what the sample makes of them."""

    path: Path
    default_labeller: str
    count: int = 0
    checks: set[str] = field(default_factory=set)
    # Filled by `settle`: per judged check, its calibration (with the sample's seed), and how
    # many labels fall in its sample and outside it.
    calibrations: dict[str, dict[str, Any]] = field(default_factory=dict)
    sampled: dict[str, int] = field(default_factory=dict)
    outside: dict[str, int] = field(default_factory=dict)

    def add(self, record: Record, stream: Any) -> None:
        """Spool a record's labels (a judged check has one repeat: repeat 0's)."""
        if record.repeat != 0:
            return
        for check_id, (value, labeller) in record.labels.items():
            self.checks.add(check_id)
            self.count += 1
            line = [check_id, record.example_id, value, labeller, record.where, record.line]
            stream.write(orjson.dumps(line) + b"\n")

    def settle(self, binary: dict[str, bool], calibrations: dict[str, dict[str, Any]]) -> None:
        """Check every label against its check's kind, and count the sample's."""
        self.calibrations = calibrations
        for item in self.labels(binary, sampled_only=False):
            check_id, example_id = item["check_id"], item["example_id"]
            chosen = in_sample(calibrations[check_id], check_id, example_id)
            counts = self.sampled if chosen else self.outside
            counts[check_id] = counts.get(check_id, 0) + 1

    def labels(
        self, binary: dict[str, bool], sampled_only: bool = True
    ) -> Iterator[dict[str, Any]]:
        """The labels as the service takes them; only the sample's unless asked otherwise."""
        if not self.count:
            return
        with self.path.open("rb") as spool:
            for raw in spool:
                check_id, example_id, value, labeller, where, line = orjson.loads(raw)
                if check_id not in binary:
                    continue
                if sampled_only and not in_sample(
                    self.calibrations[check_id], check_id, example_id
                ):
                    continue
                label = _label(value, binary[check_id], check_id, where, line)
                named = identifier(labeller) if labeller else self.default_labeller
                yield {
                    "check_id": check_id,
                    "example_id": example_id,
                    "label": label,
                    "labeller": named,
                }

    def batches(self, binary: dict[str, bool], size: int) -> Iterator[tuple[bytes, int]]:
        """The sample's labels as NDJSON, `size` at a time (bytes, count)."""
        lines: list[bytes] = []
        for label in self.labels(binary):
            lines.append(orjson.dumps(label))
            if len(lines) == size:
                yield b"\n".join(lines) + b"\n", len(lines)
                lines = []
        if lines:
            yield b"\n".join(lines) + b"\n", len(lines)

    def summary(self) -> dict[str, dict[str, int]]:
        """Per judged check: labels in its sample (sent) and outside it (not sent)."""
        return {
            check_id: {
                "sampled": self.sampled.get(check_id, 0),
                "outside": self.outside.get(check_id, 0),
            }
            for check_id in sorted(self.calibrations)
        }


def _label(value: Value, binary: bool, check_id: str, where: str, line: int | None) -> Any:
    """A label's value as the service takes it: pass or fail on a pass/fail check, a number on
    a scored one."""
    if binary:
        if value in (True, 1.0):
            return "pass"
        if value in (False, 0.0):
            return "fail"
    elif isinstance(value, float | bool):
        return float(value)
    kind = "pass or fail (C/I, true/false, 1/0)" if binary else "a number"
    raise SourceError(
        where, f"a human label of {check_id!r} is {kind}, not {value!r}", line=line, field="label"
    )
