"""Typed values about reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReportFilters:
    """What a list of reports is narrowed to (None: not narrowed); hashable, so it keys the
    kept pages."""

    subject_digest: str | None = None
    suite: str | None = None
    result: str | None = None
    status: str | None = None
    mode: str | None = None

    def given(self) -> dict[str, str]:
        """The filters set, by name."""
        return {
            name: value
            for name in ("subject_digest", "suite", "result", "status", "mode")
            if (value := getattr(self, name)) is not None
        }
