"""Inspect AI logs (`.eval`, the zip Inspect writes by default, and `.json`), read sample by sample.

A scorer becomes a check; a sample id an example id; an epoch a repeat (epoch 1 is repeat 0).
C/I (and True/False, 1/0) are pass/fail; N counts as I and P as 0.5, as Inspect's own metrics
count them; other numbers are scores. A sample with an error is `error` in every check; a
sample a scorer did not score is `skipped` in that check.

Human labels of a judged check (docs/importing.md, "Human labels"): a score whose `metadata`
holds `human_label` (and `labeller`) labels that scorer's check; with `--label-scorer HUMAN`,
the scorer HUMAN is no check but the labels of another (`HUMAN=CHECK`, or the only other
scorer)."""

from __future__ import annotations

import math
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import zstandard

from app.cli.importers import jsonstream
from app.cli.importers.source import (
    CheckSource,
    Record,
    SourceError,
    SourceRun,
    Value,
    identifier,
    measures_of,
    tag,
)

# The fields of an EvalSample as inspect_ai (up to 0.3.285) writes them.
SAMPLE_FIELDS = frozenset(
    [
        "attachments",
        "choices",
        "completed_at",
        "description",
        "epoch",
        "error",
        "error_retries",
        "events",
        "events_data",
        "files",
        "id",
        "input",
        "invalidation",
        "limit",
        "message_limit",
        "messages",
        "metadata",
        "model_fallbacks",
        "model_usage",
        "output",
        "role_usage",
        "sandbox",
        "scores",
        "setup",
        "started_at",
        "store",
        "target",
        "time_limit",
        "timelines",
        "token_limit",
        "token_limit_type",
        "token_limit_usage",
        "total_time",
        "turn_count",
        "uuid",
        "working_time",
    ]
)
LETTER_VALUES: dict[str, Value] = {"C": True, "I": False, "N": False, "P": 0.5}
_ZSTD = 93  # the zip method number of Zstandard, which Inspect uses since 0.3.1xx
_DECOMPRESSOR = zstandard.ZstdDecompressor()


class InspectLog:
    """One Inspect log file."""

    def __init__(self, path: Path, label_scorer: str | None = None) -> None:
        self.path = path
        self._zip = path.suffix == ".eval"
        if not self._zip and path.suffix != ".json":
            raise SourceError(path, "an Inspect log ends in .eval or .json")
        self._header: dict[str, Any] | None = None
        # `--label-scorer HUMAN[=CHECK]`: the scorer whose scores are labels, and their check.
        self.label_scorer, _, self._label_check = (label_scorer or "").partition("=")

    def describe(self) -> SourceRun:
        """The task and its scorers, from the log's header."""
        header = self.header()
        spec = header.get("eval")
        if not isinstance(spec, dict) or not isinstance(spec.get("task"), str):
            raise SourceError(self.path, "not an Inspect log (no eval.task)", field="eval.task")
        task = spec["task"]
        checks = []
        for i, scorer in enumerate(spec.get("scorers") or []):
            name = scorer.get("name") if isinstance(scorer, dict) else None
            if not isinstance(name, str):
                raise SourceError(self.path, "a scorer without a name", field=f"eval.scorers[{i}]")
            definition = {"scorer": name, "options": scorer.get("options") or {}}
            if name != self.label_scorer:
                checks.append(CheckSource(identifier(name), task, name, definition))
        self._check_label_scorer(spec, checks)
        summary = {"status": header.get("status"), "results": header.get("results")}
        model = spec.get("model")
        model = model if isinstance(model, str) and model.strip() else None
        return SourceRun("inspect", task, checks, [self.path], summary, model)

    def _check_label_scorer(self, spec: dict[str, Any], checks: list[CheckSource]) -> None:
        """`--label-scorer` names a scorer of the log, and the one check its scores label."""
        if not self.label_scorer:
            return
        names = [s.get("name") for s in spec.get("scorers") or [] if isinstance(s, dict)]
        if self.label_scorer not in names:
            raise SourceError(
                self.path,
                f"--label-scorer {self.label_scorer}: no such scorer (scorers: "
                f"{', '.join(map(str, names))})",
            )
        ids = [c.check_id for c in checks]
        if not self._label_check and len(ids) == 1:
            self._label_check = ids[0]
        if self._label_check not in ids:
            raise SourceError(
                self.path,
                f"--label-scorer {self.label_scorer}: name the check its scores label, "
                f"{self.label_scorer}=CHECK (checks: {', '.join(ids)})",
            )

    @property
    def labelling(self) -> tuple[str, str] | None:
        """(the label scorer, the check it labels), with `--label-scorer`."""
        return (self.label_scorer, self._label_check) if self.label_scorer else None

    def check(self, check_id: str) -> CheckSource:
        """Every check of an Inspect log is one of its header's scorers."""
        return next(c for c in self.describe().checks if c.check_id == check_id)

    def header(self) -> dict[str, Any]:
        """The log's header (everything but the samples)."""
        if self._header is None:
            if self._zip:
                self._header = self._member_json("header.json")
            else:
                self._header = {
                    key: jsonstream.first(self.path, key) for key in ("eval", "status", "results")
                }
                if self._header["eval"] is None:
                    raise SourceError(self.path, "not an Inspect log (no eval)", field="eval")
        return self._header

    def records(self) -> Iterator[Record]:
        """Each sample, as one record."""
        scorers = {c.scorer: c.check_id for c in self.describe().checks}
        task = self.describe().name
        labelling = self.labelling
        for sample, where, line in self._samples():
            record = _record(sample, scorers, task, self.path, where, line)
            if not sample.get("error"):
                place = f"{self.path}:{where}" if line is None else str(self.path)
                record.labels = _labels(sample, scorers, labelling, place, line)
            yield record

    def _samples(self) -> Iterator[tuple[dict[str, Any], str, int | None]]:
        if not self._zip:
            for i, (sample, line) in enumerate(jsonstream.items(self.path, "samples.item")):
                yield sample, f"samples[{i}]", line
            return
        try:
            archive = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise SourceError(self.path, f"not a complete .eval log (a zip): {exc}") from exc
        with archive:
            for name in archive.namelist():
                if name.startswith("samples/") and name.endswith(".json"):
                    yield self._member_json(name, archive), name, None

    def _member_json(self, name: str, archive: zipfile.ZipFile | None = None) -> Any:
        try:
            if archive is None:
                with zipfile.ZipFile(self.path) as opened:
                    data = _read_member(opened, name)
            else:
                data = _read_member(archive, name)
        except KeyError as exc:
            raise SourceError(self.path, f"no {name} in the log (is the run finished?)") from exc
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            raise SourceError(self.path, f"{name} cannot be read: {exc}") from exc
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SourceError(f"{self.path}:{name}", f"not valid JSON: {exc}") from exc


def _read_member(archive: zipfile.ZipFile, name: str) -> bytes:
    """A member's bytes, for the stdlib's methods and Zstandard (checked against its CRC)."""
    info = archive.getinfo(name)
    if info.compress_type != _ZSTD:
        return archive.read(name)
    stream = archive.fp
    assert stream is not None
    # The local header: 30 bytes, then the name and an extra field of the lengths it gives.
    stream.seek(info.header_offset)
    local = stream.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"{name}: bad local header")
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    stream.seek(info.header_offset + 30 + name_length + extra_length)
    raw = stream.read(info.compress_size)
    data = _DECOMPRESSOR.decompress(raw, max_output_size=max(info.file_size, 1))
    if len(data) != info.file_size:  # several frames (Inspect splits members over 200 MiB)
        data = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True).read()
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"{name}: bad CRC or size")
    return data


def _record(
    sample: Any, scorers: dict[str, str], task: str, path: Path, where: str, line: int | None
) -> Record:
    def fail(field: str, message: str) -> SourceError:
        return SourceError(
            f"{path}:{where}" if line is None else path, message, line=line, field=field
        )

    if not isinstance(sample, dict):
        raise fail("sample", "a sample is a JSON object")
    unknown = sorted(set(sample) - SAMPLE_FIELDS)
    if unknown:
        raise fail(unknown[0], "unknown sample field (read: inspect_ai logs up to 0.3.285)")
    sample_id, epoch = sample.get("id"), sample.get("epoch")
    if isinstance(sample_id, bool) or not isinstance(sample_id, str | int):
        raise fail("id", "a sample id is a string or an integer")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise fail("epoch", "an epoch is an integer from 1")
    values, outputs = _scored(sample, scorers, fail)
    body = {k: sample[k] for k in ("input", "target", "choices") if k in sample}
    metadata: dict[str, Any] = (
        sample["metadata"] if isinstance(sample.get("metadata"), dict) else {}
    )
    tags = [t for k, v in sorted(metadata.items()) if (t := tag(k, v))]
    return Record(
        task,
        identifier(str(sample_id)),
        epoch - 1,
        body,
        tags,
        values,
        outputs,
        where,
        line,
        _measures(sample),
    )


def _measures(sample: dict[str, Any]) -> dict[str, float]:
    """What Inspect recorded of a sample's time and tokens: `total_time` (seconds) as
    latency_ms, and `model_usage`'s tokens summed over the models the sample called."""
    seconds = sample.get("total_time")
    found = sample.get("model_usage")
    usage: dict[str, Any] = found if isinstance(found, dict) else {}
    tokens: dict[str, float] = {}
    for model in usage.values():
        if not isinstance(model, dict):
            continue
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            value = model.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                tokens[name] = tokens.get(name, 0) + value
    latency = seconds * 1000 if isinstance(seconds, int | float) else None
    return measures_of(latency_ms=latency, **tokens)


def _scored(
    sample: dict[str, Any], scorers: dict[str, str], fail: Callable[[str, str], SourceError]
) -> tuple[dict[str, Value], dict[str, Any]]:
    """Each check's value and output from one sample's scores (or its error)."""
    output: dict[str, Any] = sample["output"] if isinstance(sample.get("output"), dict) else {}
    completion = output.get("completion", "")
    values: dict[str, Value] = {}
    outputs: dict[str, Any] = {}
    error = sample.get("error")
    scores = sample.get("scores") or {}
    if not isinstance(scores, dict):
        raise fail("scores", "scores is an object")
    for scorer, check_id in scorers.items():
        if error:
            values[check_id] = "error"
            message = error.get("message") if isinstance(error, dict) else str(error)
            outputs[check_id] = {"error": message}
            continue
        score = scores.get(scorer)
        if score is None or (isinstance(score, dict) and score.get("value") is None):
            values[check_id] = "skipped"
            outputs[check_id] = {"completion": completion}
            continue
        if not isinstance(score, dict):
            raise fail(f"scores.{scorer}", "a score is an object")
        values[check_id] = _value(score["value"], lambda m, s=scorer: fail(f"scores.{s}.value", m))
        outputs[check_id] = {
            "completion": completion,
            **{k: score[k] for k in ("answer", "explanation") if score.get(k) is not None},
        }
    return values, outputs


def _value(value: Any, fail: Any) -> Value:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise fail("a score is a finite number")
        return float(value)
    if isinstance(value, str):
        if value in LETTER_VALUES:
            return LETTER_VALUES[value]
        raise fail(f"an unknown score value {value!r} (C, I, P, N, a number or true/false)")
    raise fail("a score with several values (an object or a list) is not supported")


def _labels(
    sample: dict[str, Any],
    scorers: dict[str, str],
    labelling: tuple[str, str] | None,
    where: str,
    line: int | None,
) -> dict[str, tuple[Value, str | None]]:
    """The human labels a sample's scores carry: `metadata.human_label` on a check's score, and
    the label scorer's value for the check it labels."""
    scores = sample.get("scores") or {}
    found: dict[str, tuple[Value, str | None]] = {}
    named = [(scorer, check_id, "metadata.human_label") for scorer, check_id in scorers.items()]
    if labelling is not None:
        named.append((labelling[0], labelling[1], "value"))
    for scorer, check_id, field in named:
        score = scores.get(scorer)
        if not isinstance(score, dict):
            continue
        found_metadata = score.get("metadata")
        metadata: dict[str, Any] = found_metadata if isinstance(found_metadata, dict) else {}
        value = score.get("value") if field == "value" else metadata.get("human_label")
        if value is None:
            continue
        labeller = metadata.get("labeller")

        def fail(message: str, field: str = f"scores.{scorer}.{field}") -> SourceError:
            return SourceError(where, message, line=line, field=field)

        if labeller is not None and not isinstance(labeller, str):
            raise fail("a labeller is a string", f"scores.{scorer}.metadata.labeller")
        found[check_id] = (_value(value, fail), labeller)
    return found
