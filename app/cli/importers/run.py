"""`evalbook import inspect|lm-eval|promptfoo`: read, plan, then send through `app.cli.client`.

Nothing reaches the service before the whole file has been read and checked; once the
evaluation has started, a refused batch cancels it, so nothing is left half-created. The
evaluation's start carries an Idempotency-Key made of the files' digest and the options, so
importing the same run again answers the same evaluation and report."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import rfc8785
from tqdm import tqdm

from app.cli.client import NDJSON, ClientError, EvalBookClient
from app.cli.importers.activation import activation_allowed, inspect_activation
from app.cli.importers.inspect_log import InspectLog
from app.cli.importers.lm_eval import LmEvalSamples, samples_in
from app.cli.importers.plan import ImportPlan, MeasureCheck, RuleOptions, build, case_batches
from app.cli.importers.promptfoo import PromptfooResults
from app.cli.importers.source import Reader, SourceError, files_digest
from app.domain import exits
from app.domain.identifiers import SUBJECT_DIGEST_RE
from app.domain.reasons import reason_sentence

T = TypeVar("T")
BATCH = 20_000


# The first bytes of files people hand the wrong importer, and what to hand it instead.
_SIGNATURES = ((b"PK\x03\x04", "a zip archive"), (b"\x1f\x8b", "a gzip file"))
_EXPECTED = {
    "inspect": "an Inspect log (.eval or .json, from `inspect eval --log-dir`)",
    "lm-eval": "lm-eval's samples (samples_*.jsonl, from `lm_eval --log_samples`)",
    "promptfoo": "promptfoo's results JSON (from `promptfoo eval -o results.json`)",
}


def _kind_problem(tool: str, path: Path) -> str | None:
    """Why `path` is not a file of `tool` at all (a zip, a YAML config, …), or None."""
    with path.open("rb") as stream:
        head = stream.read(512)
    found = next((name for magic, name in _SIGNATURES if head.startswith(magic)), None)
    if found == "a zip archive" and tool == "inspect":
        return None  # an .eval log is a zip archive
    if found is None and tool != "inspect":
        text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if text and text[:1] not in (b"{", b"["):
            yaml = path.suffix.lower() in (".yaml", ".yml") or b":" in text.split(b"\n", 1)[0]
            found = "a YAML file (a configuration?)" if yaml else "not JSON"
    if found is None:
        return None
    return f"this is {found}; `evalbook import {tool}` reads {_EXPECTED[tool]}"


def guess_tool(path: Path) -> tuple[str, str] | None:
    """Which importer a file is for, from its name and first bytes: (tool, what it is)."""
    try:
        with path.open("rb") as stream:
            head = stream.read(1 << 16)
    except OSError:
        return None
    if head.startswith(b"PK\x03\x04"):
        return "inspect", "an Inspect .eval log"
    if re.fullmatch(r"samples_.+\.jsonl", path.name) or head.lstrip().startswith(b'{"doc_id"'):
        return "lm-eval", "lm-eval's samples"
    if b'"lm_eval_version"' in head or b'"n-samples"' in head:
        return "lm-eval", "lm-eval's aggregate results (import the samples_*.jsonl beside it)"
    if b'"evalId"' in head or (b'"prompts"' in head and b'"results"' in head):
        return "promptfoo", "promptfoo's results"
    if b'"eval"' in head and b'"task"' in head:
        return "inspect", "an Inspect .json log"
    return None


def with_hint(tool: str, error: SourceError) -> str:
    """The error, and the importer the file is for when it is another one."""
    guessed = guess_tool(Path(error.file))
    if guessed is None or guessed[0] == tool:
        return str(error)
    other, what = guessed
    return f"{error}\n(this looks like {what}: try `evalbook import {other} {error.file}`)"


def _expanded(tool: str, paths: list[Path]) -> list[Path]:
    """Directories given to lm-eval stand for the samples files below them."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir() and tool == "lm-eval":
            found += samples_in(path)
        elif path.is_dir():
            raise SourceError(path, f"a directory; `evalbook import {tool}` reads a file")
        elif not path.exists():
            raise SourceError(path, "no such file")
        else:
            found.append(path)
    return found


def reader_for(tool: str, paths: list[Path], label_scorer: str | None = None) -> Reader:
    """The reader of a tool's files (for lm-eval, a directory is searched for samples)."""
    if label_scorer and tool != "inspect":
        raise ValueError("--label-scorer reads Inspect logs (their scorers) only")
    paths = _expanded(tool, paths)
    for path in paths:
        if not path.is_file():
            raise SourceError(path, "not a regular file")
        problem = _kind_problem(tool, path)
        if problem is not None:
            raise SourceError(path, problem)
    if tool == "inspect":
        if len(paths) != 1:
            raise SourceError(paths[1], "one Inspect log at a time")
        return InspectLog(paths[0], label_scorer)
    if tool == "lm-eval":
        return LmEvalSamples(paths)
    if len(paths) != 1:
        raise SourceError(paths[1], "one promptfoo results file at a time")
    return PromptfooResults(paths[0])


def parse_subject(text: str) -> dict[str, Any]:
    """`--subject`: a JSON object, or `digest=…,name=…` pairs."""
    if text.lstrip().startswith("{"):
        subject = json.loads(text)
        if not isinstance(subject, dict):
            raise ValueError("--subject: a JSON object")
    else:
        subject = {}
        for pair in text.split(","):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ValueError("--subject: a JSON object or key=value pairs, e.g. digest=sha1:…")
            subject[key.strip()] = value.strip()
    if "digest" not in subject:
        raise ValueError("--subject needs a digest, e.g. digest=sha1:4f1c…")
    digest = subject["digest"]
    if not isinstance(digest, str) or SUBJECT_DIGEST_RE.fullmatch(digest) is None:
        raise ValueError(
            f"--subject digest {digest!r}: a digest is ALGORITHM:HEX in lower case with 8 or "
            "more hex digits, e.g. sha1:4f1c0a7e9b2d3c5e6f708192a3b4c5d6e7f80912 (a commit)"
        )
    return subject


def _within(option: str, value: float, low: float, high: float, *, open_low: bool = False) -> None:
    if not (low < value <= high if open_low else low <= value <= high):
        bracket = "(" if open_low else "["
        raise ValueError(f"{option} {value:g}: must be within {bracket}{low:g}, {high:g}]")


def rule_options(args: argparse.Namespace) -> RuleOptions:
    """The suite-rule options, checked before any file is read (thresholds against each
    check's scale are checked once the run is read)."""
    check_thresholds = {}
    for item in args.check_threshold:
        check_id, sep, value = item.rpartition("=")
        if not sep:
            raise ValueError("--check-threshold: CHECK=VALUE")
        check_thresholds[check_id] = float(value)
    _within("--alpha", args.alpha, 0, 0.5, open_low=True)
    _within("--min-coverage", args.min_coverage, 0, 1)
    _within("--margin", args.margin, 0, 1)
    if args.min_samples < 1:
        raise ValueError(f"--min-samples {args.min_samples}: must be 1 or more")
    _within("--label-fraction", args.label_fraction, 0, 1, open_low=True)
    if args.min_labels < 2:
        raise ValueError(f"--min-labels {args.min_labels}: must be 2 or more")
    if args.validity_hours <= 0:
        raise ValueError(f"--validity-hours {args.validity_hours:g}: must be more than 0")
    if args.baseline and args.rule == "threshold":
        raise ValueError(
            "--baseline compares with a baseline: choose a comparing --rule "
            "(non_inferiority or superiority)"
        )
    return RuleOptions(
        threshold=args.threshold,
        check_thresholds=check_thresholds,
        rule=args.rule,
        alpha=args.alpha,
        margin=args.margin,
        correction=args.correction,
        min_coverage=args.min_coverage,
        min_samples=args.min_samples,
        validity_hours=args.validity_hours,
        optional_checks=list(args.optional),
        slice_tags=list(args.slice),
        measure_checks=[MeasureCheck.parse(spec) for spec in args.measure_check],
        label_fraction=args.label_fraction,
        min_labels=args.min_labels,
        labeller=args.labeller or (args.label_scorer or "").partition("=")[0] or "human",
    )


def cmd_import(args: argparse.Namespace) -> int:
    """Run one import; 0 when the report was issued, 2 on bad input or a refused request."""
    show = args.progress or (args.progress is None and sys.stderr.isatty())

    def progress(items: Iterable[T], **kwargs: Any) -> Iterable[T]:
        shown: Iterable[T] = tqdm(items, disable=not show, file=sys.stderr, **kwargs)
        return shown

    try:
        subject = parse_subject(args.subject)
        reader = reader_for(args.tool, [Path(p) for p in args.files], args.label_scorer)
        plan = build(reader, rule_options(args), args.suite, progress)
    except SourceError as exc:
        print(f"evalbook import: {with_hint(args.tool, exc)}", file=sys.stderr)
        return exits.NOT_FOUND if exc.message == "no such file" else exits.REFUSED
    except ValueError as exc:
        print(f"evalbook import: {exc}", file=sys.stderr)
        return exits.USAGE
    with plan.workdir:
        start = _start_body(args, subject, plan)
        _announce(args, plan)
        if args.dry_run:
            return _dry_run(args, plan, start)
        label_token = args.label_token or os.environ.get("EVALBOOK_LABEL_TOKEN")
        if plan.labels.calibrations and not label_token:
            print(NO_LABEL_TOKEN, file=sys.stderr)
            return exits.NO_PERMISSION
        try:
            client = EvalBookClient.from_environment(args.url, args.token)
            activation = inspect_activation(client, plan)
            activation_allowed(activation, args.activate)
            key = _start_key(args, plan, start)
            labeller = EvalBookClient(client.base_url, label_token) if label_token else None
            report = send(client, plan, start, key, show, activation.needed, labeller)
        except SourceError as exc:
            print(f"evalbook import: {exc}", file=sys.stderr)
            return exits.REFUSED
        except ClientError as exc:
            print(f"evalbook import: {exc}", file=sys.stderr)
            return exits.for_status(exc.status)
    _print_report(client.base_url, report, start, plan)
    return 0


def _print_report(
    base_url: str, report: dict[str, Any], start: dict[str, Any], plan: ImportPlan
) -> None:
    """The issued report: its result, each check, the reasons, its page and the next step."""
    body = report["body"]
    print(f"evaluation {body['evaluation_id']}")
    print(f"report {report['report_id']}: {body['result']}")
    for check in body["checks"]:
        print(f"  {check['check_id']}: {check['status']} ({check.get('explanation', '')})")
    for reason in body.get("reasons") or []:
        print(f"  why {body['result']}: {reason_sentence(reason, body)}")
    print(f"{base_url}/reports/{report['report_id']}")
    print(next_step(start, body, plan))


NO_LABEL_TOKEN = (
    "evalbook import: the run holds human labels: pass --label-token (or set "
    "EVALBOOK_LABEL_TOKEN) with a labeller token, which attests that people labelled them "
    "(evalbook token create --kind labeller)"
)


def _announce(args: argparse.Namespace, plan: ImportPlan) -> None:
    """The plan's notes, what the import chose and what it makes of the labels (stderr)."""
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    print(chosen_lines(args, plan), file=sys.stderr)
    for line in label_lines(plan):
        print(line, file=sys.stderr)


def label_lines(plan: ImportPlan) -> list[str]:
    """What the import makes of the run's human labels, per judged check."""
    lines = []
    for check_id, counts in plan.labels.summary().items():
        calibration = plan.labels.calibrations[check_id]
        lines.append(
            f"judged check {check_id}: {counts['sampled']} human labels in its sample "
            f"(label_fraction {calibration['label_fraction']:g}) will be sent, "
            f"{counts['outside']} outside it will not"
        )
    return lines


def chosen_lines(args: argparse.Namespace, plan: ImportPlan) -> str:
    """What the import chose for the user, said before anything is sent."""
    mode, why = chosen_mode(args)
    renamed = args.suite and args.suite != plan.suite_name
    named = f" (from --suite {args.suite!r})" if renamed else ""
    return f"suite {plan.suite_name}{named}, version {plan.suite_version}\nmode {mode}: {why}"


def next_step(start: dict[str, Any], body: dict[str, Any], plan: ImportPlan) -> str:
    """The command that reads this report next: the gate's, or the comparison's."""
    digest = start["subject"]["digest"]
    if start["mode"] == "gate":
        return f"gate on it: evalbook gate --subject {digest} --suite {plan.suite_name}"
    rule = plan.suite_body["decision_rule"]["rule"]
    if rule in COMPARING_RULES and "baseline_evaluation_id" not in start:
        return (
            f"compare a candidate with it: evalbook import {plan.run.tool} FILE --subject … "
            f"--suite {plan.suite_name} --rule {rule} "
            f"(the same rule options) --baseline {body['evaluation_id']}"
        )
    return f"mode {start['mode']}: the gate does not read this report"


def _dry_run(args: argparse.Namespace, plan: ImportPlan, start: dict[str, Any]) -> int:
    """Print the plan, with what it does to the suite's active version when the service can
    be asked (nothing is sent); 2 when the import would be refused."""
    summary: dict[str, Any] = {**plan.summary(), "evaluation": start}
    code = 0
    try:
        client = EvalBookClient.from_environment(args.url, args.token)
        client.retries = 0
        activation = inspect_activation(client, plan)
    except ClientError as exc:
        summary["activation"] = {"checked": False, "why": str(exc)}
    else:
        summary["activation"] = {"checked": True, **activation.summary()}
        if activation.replaces and not args.activate:
            summary["activation"]["refused"] = activation.refusal()
            code = 2
    print(json.dumps(summary, indent=2))
    return code


def send(
    client: EvalBookClient,
    plan: ImportPlan,
    start: dict[str, Any],
    key: str,
    show: bool,
    activate: bool,
    labeller: EvalBookClient | None = None,
) -> dict[str, Any]:
    """Definitions, the start, the cases, the labels (sent with the `labeller` client) and the
    finish; a refused batch cancels the evaluation. The suite version is activated only when
    `activate` (see `activation_allowed`)."""
    for name, version, body in plan.scorers:
        client.request("PUT", f"/api/v1/scorers/{name}/versions/{version}", json=body)
    for dataset in plan.datasets:
        client.request(
            "PUT",
            f"/api/v1/datasets/{dataset.name}/versions/{dataset.version}",
            content=partial(_chunks, dataset.path),
            content_type=NDJSON,
        )
    suite_path = f"/api/v1/suites/{plan.suite_name}"
    client.request("PUT", f"{suite_path}/versions/{plan.suite_version}", json=plan.suite_body)
    if activate:
        client.request("POST", f"{suite_path}/versions/{plan.suite_version}/activate")
    started = client.request("POST", "/api/v1/evaluations", json=start, idempotency_key=key)
    evaluation = started["evaluation_id"]
    if started["status"] != "running":
        print(f"this run was imported before: evaluation {evaluation}", file=sys.stderr)
        report: dict[str, Any] = client.request("GET", f"/api/v1/evaluations/{evaluation}/report")
        return report
    try:
        _send_evidence(client, labeller, plan, evaluation, show)
    except (ClientError, SourceError) as exc:
        if isinstance(exc, ClientError) and (exc.status is None or exc.status >= 500):
            raise  # the service is out of reach: a re-run resumes the same evaluation
        client.request("POST", f"/api/v1/evaluations/{evaluation}/cancel")
        raise ClientError(
            f"{exc}\n(evaluation {evaluation} was cancelled)", getattr(exc, "status", None)
        ) from exc
    finished: dict[str, Any] = client.request("POST", f"/api/v1/evaluations/{evaluation}/finish")
    return finished


def _send_evidence(
    client: EvalBookClient,
    labeller: EvalBookClient | None,
    plan: ImportPlan,
    evaluation: str,
    show: bool,
) -> None:
    """The cases in NDJSON batches, then the sample's labels with the labeller's token."""
    bar = tqdm(
        total=plan.case_count, disable=not show, file=sys.stderr, desc="sending", unit=" cases"
    )
    with bar:
        for batch, count in case_batches(plan, BATCH):
            client.request(
                "POST",
                f"/api/v1/evaluations/{evaluation}/cases",
                content=batch,
                content_type=NDJSON,
            )
            bar.update(count)
    if labeller is None:
        return
    for batch, _ in plan.labels.batches(plan.binary, BATCH):
        labeller.request(
            "POST", f"/api/v1/evaluations/{evaluation}/labels", content=batch, content_type=NDJSON
        )


COMPARING_RULES = ("non_inferiority", "superiority")


def chosen_mode(args: argparse.Namespace) -> tuple[str, str]:
    """The evaluation's mode and why: as asked; else a gate, except a baseline run (a comparing
    rule without --baseline), which nothing gates on (docs/importing.md, "Modes")."""
    if args.mode:
        return args.mode, "as --mode asked"
    if args.rule in COMPARING_RULES and not args.baseline:
        return "experiment", (
            "a baseline run (a comparing --rule without --baseline): the gate does not read it; "
            "import a candidate with --baseline and this run's evaluation id"
        )
    if args.baseline:
        return "gate", "a comparison with --baseline: `evalbook gate` reads its report"
    return "gate", "`evalbook gate` reads its report"


def _start_body(
    args: argparse.Namespace, subject: dict[str, Any], plan: ImportPlan
) -> dict[str, Any]:
    mode, _ = chosen_mode(args)
    if plan.run.model and not any(key in subject for key in ("name", "model")):
        # The subject's name people recognise, from the run when --subject gave none.
        subject = {**subject, "model": plan.run.model}
    body: dict[str, Any] = {
        "subject": subject,
        "suite": {"name": plan.suite_name, "version": plan.suite_version},
        "mode": mode,
        "execution_mode": args.execution_mode,
    }
    if args.baseline:
        body["baseline_evaluation_id"] = args.baseline
    return body


def _start_key(args: argparse.Namespace, plan: ImportPlan, start: dict[str, Any]) -> str:
    identity: dict[str, Any] = {
        "files": files_digest(plan.run.files),
        "tool": plan.run.tool,
        "start": start,
    }
    return "import-" + hashlib.sha256(rfc8785.dumps(identity)).hexdigest()[:40]


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            yield chunk
