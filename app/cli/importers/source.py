"""What a reader yields, whatever the tool: records of (example, repeat) and each check's value."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

# A check's value in a record: True/False (a pass/fail verdict), a number (a score), or one of
# these unscored statuses.
UNSCORED = ("error", "skipped", "abstained")
Value = bool | float | str

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")


class SourceError(Exception):
    """A file the importer cannot read, named by file, line (when known) and field."""

    def __init__(
        self, file: str | Path, message: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.file, self.line, self.field, self.message = str(file), line, field, message
        where = self.file if line is None else f"{self.file}:{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


@dataclass(frozen=True)
class CheckSource:
    """A check the run measured: which dataset it covers and how its scorer is described."""

    check_id: str
    dataset: str
    scorer: str
    definition: dict[str, Any]


@dataclass
class Record:
    """One (example, repeat) of the run: the example's content and each check's value."""

    dataset: str
    example_id: str
    repeat: int
    body: Any
    tags: list[str]
    values: dict[str, Value]
    outputs: dict[str, Any]
    where: str = ""
    line: int | None = None
    # What the tool recorded of the run's cost and time (docs/importing.md): every check of
    # the record carries them.
    measures: dict[str, float] = field(default_factory=dict)
    # Human labels the tool recorded, per check: (the label's value, who labelled it, if said).
    labels: dict[str, tuple[Value, str | None]] = field(default_factory=dict)


@dataclass
class SourceRun:
    """What a reader knows before the records: the run's name and its checks, in order."""

    tool: str
    name: str
    checks: list[CheckSource]
    files: list[Path]
    tool_summary: dict[str, Any] = field(default_factory=dict)
    # The model the tool ran, when its files name one (the subject's name by default).
    model: str | None = None


class Reader(Protocol):
    """A tool's file format, read in two streaming passes."""

    def describe(self) -> SourceRun:
        """The run's name and checks, those known before the records (a header's scorers)."""
        ...

    def check(self, check_id: str) -> CheckSource:
        """A check first seen in the records (after a full pass of `records`)."""
        ...

    def records(self) -> Iterator[Record]:
        """Every (example, repeat), streamed; may be called more than once."""
        ...


def measures_of(**found: Any) -> dict[str, float]:
    """The named values that are finite numbers >= 0 (a tool's missing or odd ones left out)."""
    return {
        name: float(value)
        for name, value in found.items()
        if isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    }


def identifier(text: str, fallback: str = "x") -> str:
    """`text` made a valid EvalBook identifier (ASCII letters, digits, `_.:-`; ≤ 200)."""
    cleaned = _UNSAFE.sub("-", text).strip("-_.:")
    return (cleaned or fallback)[:200]


def tag(key: str, value: Any) -> str | None:
    """A `key:value` tag for a short scalar, else None."""
    if isinstance(value, bool):
        value = str(value).lower()
    if not isinstance(value, str | int | float) or len(str(value)) > 100:
        return None
    text = f"{key}:{value}"
    return text if text.isprintable() and len(text) <= 200 else None


def files_digest(paths: list[Path]) -> str:
    """sha256 over the files' bytes, in order: the identity of an imported run."""
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as stream:
            _update(digest, stream)
    return digest.hexdigest()


def _update(digest: Any, stream: BinaryIO) -> None:
    while chunk := stream.read(1 << 20):
        digest.update(chunk)
