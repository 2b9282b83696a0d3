"""What the line checks learn from a bundle for its end: each check is given the facts
explicitly, adds what its line says, and returns its findings; `settle` reads them once the
whole bundle is read (app/bundles/settle.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app.bundles.lines import CheckLine, HeaderLine, ScorerVersionLine
from app.bundles.rebuild import DatasetDigest, EvidenceDigest

# (kind, check, example, repeat) of a case
CaseKey = tuple[str, str, str, int]


@dataclass
class Facts:
    """The lines' facts in the order the bundle gives them. `keep_cases` (for --replay) keeps
    every case's fields; otherwise the verifier holds no case beyond the trees' leaves."""

    keep_cases: bool = False
    # The header: its keys, and whether its exporter may read bodies.
    header: HeaderLine | None = None
    bundle_keys: dict[str, bytes] = field(default_factory=dict)
    may_hold_bodies: bool = True
    # The report line.
    report_line: int = 0
    body: dict[str, Any] = field(default_factory=dict)
    body_digest: str = ""
    envelope: Any = None
    attestation: Any = None
    supersessions: Any = None
    log: Any = None
    test_result: Any = None
    # The supersession statements whose signature and names were proven: (envelope, predicate).
    signed_statements: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    # The tree the log's proofs lead to once proven: the newest checkpoint's (size, root).
    log_tree: tuple[int, bytes] | None = None
    # The suite and its scorers: (name, version) -> the digest the suite pins, and the lines.
    suite: dict[str, Any] = field(default_factory=dict)
    pinned: dict[tuple[str, str], str] = field(default_factory=dict)
    scorer_lines: dict[tuple[str, str], ScorerVersionLine] = field(default_factory=dict)
    # Datasets: the one whose examples are being read, every one by digest, and the examples
    # without a body as (line, dataset digest, example id).
    dataset: DatasetDigest | None = None
    datasets: dict[str, DatasetDigest] = field(default_factory=dict)
    absent_bodies: list[tuple[int, str, str]] = field(default_factory=list)
    # Checks: the one whose cases are being read, every one, and each one's line number.
    check: CheckLine | None = None
    check_lines: dict[str, CheckLine] = field(default_factory=dict)
    check_line_numbers: dict[str, int] = field(default_factory=dict)
    # Cases: each check's evidence rebuilt (with its check line's number), the trees' leaves
    # and traced counts by (kind, check), the last case read as (kind, example id, repeat),
    # the outputs left out as (line, output digest), and with keep_cases every case's fields.
    evidence: dict[str, tuple[int, EvidenceDigest]] = field(default_factory=dict)
    leaves: dict[tuple[str, str], list[bytes]] = field(default_factory=dict)
    traced_counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    last_case: tuple[str, bytes, int] | None = None
    absent_outputs: dict[CaseKey, tuple[int, str]] = field(default_factory=dict)
    cases: dict[str, dict[str, list[dict[str, Any]]]] = field(
        default_factory=lambda: {"case": {}, "baseline_case": {}}
    )
    # Labels of judged checks (docs/judges.md): the trees' leaves by (kind, check), the last
    # label read as (kind, example id), and with keep_cases every label's fields.
    label_leaves: dict[tuple[str, str], list[bytes]] = field(default_factory=dict)
    last_label: tuple[str, bytes] | None = None
    labels: dict[str, dict[str, list[dict[str, Any]]]] = field(
        default_factory=lambda: {"label": {}, "baseline_label": {}}
    )
    # The unavailable and redacted items, each with its line.
    items: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"unavailable": [], "redacted": []}
    )
