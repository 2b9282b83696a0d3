"""A bundle's lines as typed values, one type per kind (the union is tagged on `kind`).

A line is decoded once, when admission has found its fields and their types as the bundle
format says (app/bundles/format.py, whose table generates the Structs below): every type is
one admission has checked, and a field admission leaves to its line's check stays `Any`. A
field a line may leave out is `UNSET` when it is absent, which is not the same as null. A
case line whose fields are mistyped becomes a `MalformedCase`, reported by its check after
the order checks, where the careful path has always reported it.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from app.bundles.shapes import case_problem

CASE_KINDS = frozenset({"case", "baseline_case"})


class Line(msgspec.Struct, frozen=True, tag_field="kind"):
    """A line of a bundle; `kind` is its tag."""

    @property
    def kind(self) -> str:
        """The line's kind (its tag)."""
        tag: str = self.__struct_config__.tag  # type: ignore[assignment]
        return tag


# ---- generated from app/bundles/format.py (python -m app.bundles.codegen) ----


class HeaderLine(Line, tag="header", frozen=True):
    format: str
    report_id: str
    report_digest: str
    created_at: str
    exporter: dict[str, Any]
    producer: dict[str, Any]
    baseline_evaluation_id: str | None
    keys: Any = UNSET


class ReportLine(Line, tag="report", frozen=True):
    digest: str
    body: dict[str, Any]
    envelope: dict[str, Any]
    attestation: Any = None
    supersessions: Any = None
    log: Any = None
    test_result: Any = None


class SuiteVersionLine(Line, tag="suite_version", frozen=True):
    digest: str
    content: dict[str, Any]


class ScorerVersionLine(Line, tag="scorer_version", frozen=True):
    name: str
    version: str
    digest: str
    definition: Any
    score_range: Any


class DatasetVersionLine(Line, tag="dataset_version", frozen=True):
    name: str
    version: str
    digest: str
    example_count: int | float


class ExampleLine(Line, tag="example", frozen=True):
    dataset: str
    id: str
    tags: list[str]
    body_digest: str
    body: Any = UNSET


class CheckLine(Line, tag="check", frozen=True):
    check_id: str
    result: Any
    manifest: Any = None


class CaseLine(Line, tag="case", frozen=True):
    check_id: str
    example_id: str
    repeat: int | float
    status: str
    score: int | float | None
    output_digest: str | None
    evidence_refs: list[str]
    assurance: str
    scorer_digest: str
    output: Any = UNSET
    trace_ref: dict[str, str] | UnsetType = UNSET
    measures: Any = UNSET


class BaselineCaseLine(CaseLine, tag="baseline_case", frozen=True):
    pass


class LabelLine(Line, tag="label", frozen=True):
    check_id: str
    example_id: str
    label: Any
    labeller: str
    assurance: str
    note: Any = UNSET


class BaselineLabelLine(LabelLine, tag="baseline_label", frozen=True):
    pass


class UnavailableLine(Line, tag="unavailable", frozen=True):
    items: Any


class RedactedLine(Line, tag="redacted", frozen=True):
    items: Any


class TrailerLine(Line, tag="trailer", frozen=True):
    lines: Any
    sha256: Any


BundleLine = (
    HeaderLine
    | ReportLine
    | SuiteVersionLine
    | ScorerVersionLine
    | DatasetVersionLine
    | ExampleLine
    | CheckLine
    | CaseLine
    | BaselineCaseLine
    | LabelLine
    | BaselineLabelLine
    | UnavailableLine
    | RedactedLine
    | TrailerLine
)
# ---- end of what app/bundles/format.py generates ----


class MalformedCase(msgspec.Struct, frozen=True):
    """A case line whose fields have the wrong types: its kind, its check id as sent, and what
    is wrong."""

    kind: str
    check_id: Any
    problem: str


def decoded(kind: str, value: dict[str, Any]) -> BundleLine | MalformedCase:
    """An admitted line of `kind` as its typed value (a mistyped case line as MalformedCase)."""
    if kind in CASE_KINDS:
        problem = case_problem(value)
        if problem is not None:
            return MalformedCase(kind, value["check_id"], problem)
    line: BundleLine = msgspec.convert(value, BundleLine)
    return line


def case_fields(line: CaseLine) -> dict[str, Any]:
    """A case line's fields as the line gave them (absent ones left out), without its output:
    what the tree's leaf, the evidence list and --replay read, as the fast lane gives them."""
    fields: dict[str, Any] = msgspec.to_builtins(line)
    fields.pop("output", None)
    return fields
