"""lm-evaluation-harness `--log_samples` output (`samples_<task>_<time>.jsonl`), line by line.

Each (task, metric, filter) is a check (`<task>.<metric>`, with `.<filter>` unless the filter is
`none`); a `doc_id` an example id of the task's dataset; every line is repeat 0. A metric of 0
and 1 only is pass/fail, other numbers are scores. A metric whose per-sample value is not a
number (corpus metrics such as bleu keep [reference, prediction] pairs) is left out, and said."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from app.cli.importers.source import CheckSource, Record, SourceError, SourceRun, Value, identifier

# The fields of a sample line as lm-eval (up to 0.4.13) writes them, besides the metrics.
LINE_FIELDS = frozenset(
    [
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "filter",
        "metrics",
        "doc_hash",
        "prompt_hash",
        "target_hash",
    ]
)
_NAME = re.compile(r"^samples_(?P<task>.+?)(?:_\d{4}-\d{2}-\d{2}T[\d.:-]+)?\.jsonl$")


class LmEvalSamples:
    """One or more `samples_*.jsonl` files of one lm-eval run."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.tasks = [task_of(p) for p in paths]
        self._checks: dict[str, CheckSource] = {}
        self.left_out: set[str] = set()

    def describe(self) -> SourceRun:
        """The tasks; the checks are found in the lines. Several tasks make a suite named by
        all of them (sorted, joined by dots), so another set of tasks is another suite."""
        name = ".".join(sorted(set(self.tasks)))
        if len(name) > 200:
            digest = hashlib.sha256(name.encode()).hexdigest()[:12]
            name = f"lm-eval.{len(set(self.tasks))}-tasks.{digest}"
        return SourceRun("lm-eval", name, [], list(self.paths), model=model_of(self.paths))

    def check(self, check_id: str) -> CheckSource:
        """A check seen in the lines."""
        return self._checks[check_id]

    def records(self) -> Iterator[Record]:
        """Each line, as one record."""
        for path, task in zip(self.paths, self.tasks, strict=True):
            with path.open("rb") as lines:
                for number, line in enumerate(lines, start=1):
                    if line.strip():
                        yield self._record(path, task, number, line)

    def _metrics(
        self,
        sample: dict[str, Any],
        task: str,
        metrics: list[str],
        filter_name: str,
        fail: Callable[[str, str], SourceError],
    ) -> tuple[dict[str, Value], dict[str, Any]]:
        """Each numeric metric of a sample as a check's value (a new check is defined as it is
        first seen; a metric that is not a number is left out and remembered)."""
        values: dict[str, Value] = {}
        outputs: dict[str, Any] = {}
        for metric in metrics:
            if metric not in sample:
                raise fail(metric, "a metric named in `metrics` has no value")
            value = sample[metric]
            suffix = "" if filter_name == "none" else f".{filter_name}"
            check_id = identifier(f"{task}.{metric}{suffix}")
            if isinstance(value, bool) or not isinstance(value, int | float):
                self.left_out.add(check_id)
                continue
            if not math.isfinite(value):
                raise fail(metric, "a metric value is a finite number")
            if check_id not in self._checks:
                definition = {"task": task, "metric": metric, "filter": filter_name}
                self._checks[check_id] = CheckSource(check_id, task, metric, definition)
            values[check_id] = float(value)
            outputs[check_id] = {"response": sample.get("filtered_resps")}
        return values, outputs

    def _record(self, path: Path, task: str, number: int, line: bytes) -> Record:
        def fail(field: str, message: str) -> SourceError:
            return SourceError(path, message, line=number, field=field)

        try:
            sample = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise SourceError(path, f"not a JSON line: {exc}", line=number) from exc
        if not isinstance(sample, dict) or "doc_id" not in sample:
            raise fail("doc_id", "not an lm-eval sample line (no doc_id)")
        metrics = sample.get("metrics")
        if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
            raise fail("metrics", "a list of metric names")
        unknown = sorted(set(sample) - LINE_FIELDS - set(metrics))
        if unknown:
            raise fail(unknown[0], "unknown sample field (read: lm-eval output up to 0.4.13)")
        doc_id = sample["doc_id"]
        if isinstance(doc_id, bool) or not isinstance(doc_id, int | str):
            raise fail("doc_id", "an integer or a string")
        filter_name = sample.get("filter", "none")
        if not isinstance(filter_name, str):
            raise fail("filter", "a string")
        values, outputs = self._metrics(sample, task, metrics, filter_name, fail)
        body = sample.get("doc")
        return Record(
            task,
            identifier(str(doc_id)),
            0,
            body,
            [f"task:{task}"],
            values,
            outputs,
            str(path),
            number,
        )


def task_of(path: Path) -> str:
    """The task a samples file is of, from its name (`samples_<task>_<time>.jsonl`)."""
    match = _NAME.match(path.name)
    if match is None:
        raise SourceError(path, "an lm-eval samples file is named samples_<task>_<time>.jsonl")
    return match["task"]


def samples_in(directory: Path) -> list[Path]:
    """The samples files of an output directory (`--output_path`), searched below it: lm-eval
    writes them under a folder named for the model."""
    found = sorted(p for p in directory.rglob("samples_*.jsonl") if p.is_file())
    if not found:
        raise SourceError(
            directory, "a directory with no samples_*.jsonl below it (run lm_eval --log_samples)"
        )
    return found


def model_of(paths: list[Path]) -> str | None:
    """The model lm-eval ran, from a results file beside the samples (`model_name`), if any."""
    for folder in dict.fromkeys(p.parent for p in paths):
        for results in sorted(folder.glob("results*.json")):
            try:
                name = orjson.loads(results.read_bytes()).get("model_name")
            except (OSError, orjson.JSONDecodeError, AttributeError):
                continue
            if isinstance(name, str) and name.strip():
                return name.strip()[:200]
    return None
