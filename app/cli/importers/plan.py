"""From a reader's records to what the service needs: content-addressed scorer, dataset and
suite versions, the evaluation's start, and its cases in NDJSON batches.

Two streaming passes over the file: the first finds the checks, their kinds and repeats and
spools each dataset's examples to a temporary NDJSON file; the second makes the cases. A
version's label is a digest of its content, so the same run imported twice reuses them."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import rfc8785

from app.cli.importers.labels import LabelSpool
from app.cli.importers.source import (
    CheckSource,
    Reader,
    Record,
    SourceError,
    SourceRun,
    identifier,
)
from app.digest.merkle import measures_text


@dataclass
class RuleOptions:
    """The suite-rule options of `evalbook import`."""

    threshold: float
    check_thresholds: dict[str, float] = field(default_factory=dict)
    rule: str = "threshold"
    alpha: float = 0.05
    margin: float = 0.0
    correction: str = "none"
    min_coverage: float = 1.0
    min_samples: int = 1
    validity_hours: float = 168.0
    optional_checks: list[str] = field(default_factory=list)
    slice_tags: list[str] = field(default_factory=list)
    measure_checks: list[MeasureCheck] = field(default_factory=list)
    # A check whose run carries human labels is judged (docs/importing.md, "Human labels").
    label_fraction: float = 0.1
    min_labels: int = 30
    labeller: str = "human"


@dataclass(frozen=True)
class MeasureCheck:
    """A measure check `--measure-check` asks for: NAME[@CHECK]:quantile:Q:THRESHOLD[:lower]
    or NAME[@CHECK]:mean:THRESHOLD[:lower] (CHECK: the measured check, by default the first)."""

    name: str
    method: str
    threshold: float
    q: float | None = None
    better: str = "higher"
    of: str | None = None

    @staticmethod
    def parse(text: str) -> MeasureCheck:
        """The spec's parts, or ValueError naming what is wrong."""
        parts = text.split(":")
        name, _, of = parts[0].partition("@")
        better = "higher"
        if parts[-1] in ("lower", "higher"):
            better = parts.pop()
        try:
            if len(parts) == 4 and parts[1] == "quantile" and 0 < float(parts[2]) < 1:
                return MeasureCheck(
                    name, "quantile", float(parts[3]), float(parts[2]), better, of or None
                )
            if len(parts) == 3 and parts[1] == "mean":
                return MeasureCheck(name, "mean", float(parts[2]), None, better, of or None)
        except ValueError:
            pass
        raise ValueError(
            f"--measure-check {text!r}: NAME[@CHECK]:quantile:Q:THRESHOLD[:lower|higher] or "
            "NAME[@CHECK]:mean:THRESHOLD[:lower|higher]"
        )

    def check_id(self) -> str:
        """The measure check's id: the measure and its statistic (latency_ms-p95)."""
        if self.q is None:
            return identifier(f"{self.name}-mean")
        return identifier(f"{self.name}-p{self.q * 100:g}")

    def definition(self, of: str, min_coverage: float) -> dict[str, Any]:
        """The suite's check (as required, and as covered, as the checks the tool scored)."""
        aggregation: dict[str, Any] = {"method": self.method, "threshold": self.threshold}
        if self.q is not None:
            aggregation["q"] = self.q
        if self.better == "lower":
            aggregation["better"] = "lower"
        return {
            "check_id": self.check_id(),
            "measure": {"of": self.of or of, "name": self.name},
            "aggregation": aggregation,
            "min_coverage": min_coverage,
        }


@dataclass
class CheckStats:
    """What the first pass learns of a check's values."""

    source: CheckSource
    binary: bool = True
    low: float | None = None
    high: float | None = None
    repeats: int = 1
    by_value: dict[str, int] = field(default_factory=dict)

    def see(self, value: Any, repeat: int) -> None:
        """Count one value."""
        self.repeats = max(self.repeats, repeat + 1)
        if isinstance(value, str):
            self.by_value[value] = self.by_value.get(value, 0) + 1
            return
        number = float(value)
        if not isinstance(value, bool) and number not in (0.0, 1.0):
            self.binary = False
        self.low = number if self.low is None else min(self.low, number)
        self.high = number if self.high is None else max(self.high, number)
        key = "scored"
        self.by_value[key] = self.by_value.get(key, 0) + 1

    @property
    def score_range(self) -> list[float] | None:
        """[0, 1] when every score lies there, else the scores' own range; None for pass/fail."""
        if self.binary:
            return None
        low, high = self.low or 0.0, self.high or 0.0
        return [0.0, 1.0] if low >= 0.0 and high <= 1.0 else [low, max(high, low + 1e-9)]


@dataclass
class DatasetSpool:
    """A dataset's examples, spooled as NDJSON in first-seen order."""

    name: str
    path: Path
    ids: set[str] = field(default_factory=set)
    tags: set[str] = field(default_factory=set)
    line_digests: list[bytes] = field(default_factory=list)

    @property
    def version(self) -> str:
        """The version label: a digest of the examples, in whatever order the file had them."""
        return "c" + hashlib.sha256(b"".join(sorted(self.line_digests))).hexdigest()[:16]


@dataclass
class ImportPlan:
    """Everything `evalbook import` will send."""

    run: SourceRun
    scorers: list[tuple[str, str, dict[str, Any]]]
    datasets: list[DatasetSpool]
    suite_name: str
    suite_version: str
    suite_body: dict[str, Any]
    checks: dict[str, CheckStats]
    thresholds: dict[str, float]
    case_count: int
    notes: list[str]
    workdir: tempfile.TemporaryDirectory[str]
    cases_path: Path
    labels: LabelSpool

    @property
    def binary(self) -> dict[str, bool]:
        """Whether each check is pass/fail (else scored)."""
        return {check_id: stats.binary for check_id, stats in self.checks.items()}

    def summary(self) -> dict[str, Any]:
        """What would be created, for --dry-run."""
        return {
            "source": {
                "tool": self.run.tool,
                "name": self.run.name,
                "files": [str(f) for f in self.run.files],
            },
            "scorers": [{"name": n, "version": v, **body} for n, v, body in self.scorers],
            "datasets": [
                {"name": d.name, "version": d.version, "examples": len(d.ids)}
                for d in self.datasets
            ],
            "suite": {"name": self.suite_name, "version": self.suite_version, **self.suite_body},
            "cases": {
                "total": self.case_count,
                "by_check": {c: s.by_value for c, s in self.checks.items()},
            },
            "notes": self.notes,
            "labels": self.labels.summary(),
        }


def build(reader: Reader, rules: RuleOptions, suite_name: str | None, progress: Any) -> ImportPlan:
    """The one pass over the file: checks, kinds, repeats, examples and cases spooled to disk;
    then the definitions."""
    run = reader.describe()
    workdir = tempfile.TemporaryDirectory(prefix="evalbook-import-")
    checks: dict[str, CheckStats] = {c.check_id: CheckStats(c) for c in run.checks}
    datasets: dict[str, DatasetSpool] = {}
    count = 0
    files: dict[str, Any] = {}
    cases_path = Path(workdir.name) / "cases.spool"
    cases = cases_path.open("wb")
    labels = LabelSpool(Path(workdir.name) / "labels.spool", identifier(rules.labeller))
    label_stream = labels.path.open("wb")
    try:
        for record in progress(reader.records(), desc="reading", unit=" records"):
            _spool_example(record, run.tool, Path(workdir.name), datasets, files)
            for check_id, value in record.values.items():
                stats = checks.get(check_id)
                if stats is None:
                    stats = checks[check_id] = CheckStats(reader.check(check_id))
                stats.see(value, record.repeat)
                count += 1
                cases.write(_case_line(record, check_id, value))
            labels.add(record, label_stream)
    finally:
        cases.close()
        label_stream.close()
        for stream in files.values():
            stream.close()
    notes = [
        f"left out {c}: its per-sample values are not numbers"
        for c in sorted(getattr(reader, "left_out", ()))
    ]
    checks = _scored_checks(run, checks, rules)
    _check_rules_fit(run, checks, datasets, rules)
    judged = _judged(checks, datasets, labels, rules)
    scorers, suite_body, thresholds = _definitions(run, checks, datasets, rules, judged)
    labels.settle({c: s.binary for c, s in checks.items() if c in judged}, judged)
    suite_version = "c" + hashlib.sha256(rfc8785.dumps(suite_body)).hexdigest()[:12]
    return ImportPlan(
        run,
        scorers,
        list(datasets.values()),
        identifier(suite_name or run.name),
        suite_version,
        suite_body,
        checks,
        thresholds,
        count,
        notes,
        workdir,
        cases_path,
        labels,
    )


def _judged(
    checks: dict[str, CheckStats],
    datasets: dict[str, DatasetSpool],
    labels: LabelSpool,
    rules: RuleOptions,
) -> dict[str, dict[str, Any]]:
    """The calibration of each check the run holds human labels for (the sample's seed is the
    dataset's name, as the service freezes it)."""
    judged = {}
    for check_id in sorted(labels.checks & set(checks)):
        stats = checks[check_id]
        if stats.repeats > 1:
            raise ValueError(
                f"check {check_id!r} carries human labels and {stats.repeats} repeats (epochs): "
                "a judged check has one"
            )
        judged[check_id] = {
            "method": "ppi",
            "label_fraction": rules.label_fraction,
            "min_labels": rules.min_labels,
            "sample_seed": datasets[stats.source.dataset].name,
        }
    return judged


def _spool_example(
    record: Record,
    tool: str,
    workdir: Path,
    datasets: dict[str, DatasetSpool],
    files: dict[str, Any],
) -> None:
    """A record's example into its dataset's spool, the first time the example is seen."""
    spool = datasets.get(record.dataset)
    if spool is None:
        name = identifier(f"{tool}.{record.dataset}")
        spool = datasets[record.dataset] = DatasetSpool(name, workdir / f"{len(datasets)}.ndjson")
        files[record.dataset] = spool.path.open("wb")
    if record.example_id not in spool.ids:
        spool.ids.add(record.example_id)
        spool.tags.update(record.tags)
        line = _example_line(record)
        spool.line_digests.append(hashlib.sha256(line).digest())
        files[record.dataset].write(line)


def _scored_checks(
    run: Any, checks: dict[str, CheckStats], rules: RuleOptions
) -> dict[str, CheckStats]:
    """The checks with a scored sample; every check the rules name must be one of them."""
    checks = {c: s for c, s in checks.items() if s.by_value}
    if not checks:
        raise SourceError(run.files[0], "no scored sample in the file")
    for check_id in list(rules.check_thresholds) + rules.optional_checks:
        if check_id not in checks:
            raise SourceError(run.files[0], f"no check {check_id!r} (checks: {', '.join(checks)})")
    return checks


def _check_rules_fit(
    run: SourceRun,
    checks: dict[str, CheckStats],
    datasets: dict[str, DatasetSpool],
    rules: RuleOptions,
) -> None:
    """Every `--slice` tag is carried by some example, and every threshold is on its check's
    scale (a pass rate within [0, 1], a mean within the scorer's score range)."""
    tags = set().union(*(spool.tags for spool in datasets.values()))
    for slice_tag in rules.slice_tags:
        if slice_tag not in tags:
            known = ", ".join(sorted(tags)) or "none"
            raise ValueError(f"--slice {slice_tag}: no example carries this tag (tags: {known})")
    for check_id, stats in checks.items():
        threshold = rules.check_thresholds.get(check_id, rules.threshold)
        low, high = (0.0, 1.0) if stats.binary else (stats.score_range or (None, None))
        if low is not None and high is not None and not low <= threshold <= high:
            scale = "a pass rate" if stats.binary else "a mean score"
            raise ValueError(
                f"--threshold {threshold:g}: check {check_id!r} is decided on {scale} within "
                f"[{low:g}, {high:g}]"
            )


def _definitions(
    run: SourceRun,
    checks: dict[str, CheckStats],
    datasets: dict[str, DatasetSpool],
    rules: RuleOptions,
    judged: dict[str, dict[str, Any]],
) -> tuple[list[tuple[str, str, dict[str, Any]]], dict[str, Any], dict[str, float]]:
    scorers: dict[tuple[str, str], dict[str, Any]] = {}
    suite_checks = []
    thresholds = {}
    for check_id, stats in checks.items():
        body: dict[str, Any] = {"definition": {"tool": run.tool, **stats.source.definition}}
        if stats.score_range is not None:
            body["score_range"] = stats.score_range
        name = identifier(f"{run.tool}.{stats.source.scorer}")
        version = "c" + hashlib.sha256(rfc8785.dumps(body)).hexdigest()[:12]
        scorers[(name, version)] = body
        spool = datasets[stats.source.dataset]
        threshold = rules.check_thresholds.get(check_id, rules.threshold)
        thresholds[check_id] = threshold
        method = "pass_rate" if stats.binary else "mean"
        suite_checks.append(
            {
                "check_id": check_id,
                "scorer": {"name": name, "version": version},
                "dataset": {"name": spool.name, "version": spool.version},
                "repeats": stats.repeats,
                "aggregation": {"method": method, "threshold": threshold},
                "required": check_id not in rules.optional_checks,
                "min_coverage": rules.min_coverage,
                "min_samples": min(rules.min_samples, len(spool.ids)),
                "slices": [
                    {"name": identifier(t), "tag": t, "required": False}
                    for t in rules.slice_tags
                    if t in spool.tags
                ],
            }
        )
        if check_id in judged:
            suite_checks[-1]["calibration"] = judged[check_id]
    suite_body = {
        "validity_hours": rules.validity_hours,
        "decision_rule": {
            "rule": rules.rule,
            "alpha": rules.alpha,
            "margin": rules.margin,
            "correction": rules.correction,
        },
        "checks": [
            *suite_checks,
            *(
                m.definition(str(suite_checks[0]["check_id"]), rules.min_coverage)
                for m in rules.measure_checks
            ),
        ],
    }
    return [(n, v, b) for (n, v), b in scorers.items()], suite_body, thresholds


def _case_line(record: Record, check_id: str, value: Any) -> bytes:
    spooled = [
        check_id,
        record.example_id,
        record.repeat,
        value,
        record.outputs.get(check_id),
        record.measures or None,
    ]
    try:
        return orjson.dumps(spooled) + b"\n"
    except orjson.JSONEncodeError as exc:
        raise SourceError(
            record.where, f"not sendable as JSON: {exc}", line=record.line, field=check_id
        ) from exc


def _example_line(record: Record) -> bytes:
    example = {"id": record.example_id, "body": record.body, "tags": sorted(set(record.tags))}
    try:
        return orjson.dumps(example) + b"\n"
    except orjson.JSONEncodeError as exc:
        raise SourceError(
            record.where, f"not sendable as JSON: {exc}", line=record.line, field="body"
        ) from exc


def case_batches(plan: ImportPlan, batch_size: int) -> Iterator[tuple[bytes, int]]:
    """The second pass, over the spooled cases: NDJSON, `batch_size` at a time (bytes, count)."""
    lines: list[bytes] = []
    with plan.cases_path.open("rb") as spool:
        for line in spool:
            check_id, example_id, repeat, value, output, measures = orjson.loads(line)
            stats = plan.checks.get(check_id)
            if stats is None:
                continue
            case: dict[str, Any] = {
                "check_id": check_id,
                "example_id": example_id,
                "repeat": repeat,
            }
            if isinstance(value, str):
                case["status"] = value
            elif stats.binary:
                case["status"] = "pass" if float(value) == 1.0 else "fail"
            else:
                score = float(value)
                case["status"] = "pass" if score >= plan.thresholds[check_id] else "fail"
                case["score"] = score
            if output is not None:
                case["output"] = output
            # Written canonically, as the service keeps measures sent so (docs/api.md).
            measured = measures_text(measures)
            if measured is not None:
                case["measures"] = orjson.Fragment(measured)
            # Sorted keys: an output already canonical is kept as sent (docs/api.md).
            lines.append(orjson.dumps(case, option=orjson.OPT_SORT_KEYS))
            if len(lines) == batch_size:
                yield b"\n".join(lines) + b"\n", len(lines)
                lines = []
    if lines:
        yield b"\n".join(lines) + b"\n", len(lines)
