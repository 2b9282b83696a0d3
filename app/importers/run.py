"""`evalbook import inspect|lm-eval|promptfoo`: read, plan, then send through `app.client`.

Nothing reaches the service before the whole file has been read and checked; once the
evaluation has started, a refused batch cancels it, so nothing is left half-created. The
evaluation's start carries an Idempotency-Key made of the files' digest and the options, so
importing the same run again answers the same evaluation and report."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import rfc8785
from tqdm import tqdm

from app.client import NDJSON, ClientError, EvalBookClient
from app.importers.inspect_log import InspectLog
from app.importers.lm_eval import LmEvalSamples
from app.importers.plan import ImportPlan, RuleOptions, build, case_batches
from app.importers.promptfoo import PromptfooResults
from app.importers.source import Reader, SourceError, files_digest

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


def reader_for(tool: str, paths: list[Path]) -> Reader:
    """The reader of a tool's files."""
    for path in paths:
        if not path.is_file():
            raise SourceError(path, "no such file")
        problem = _kind_problem(tool, path)
        if problem is not None:
            raise SourceError(path, problem)
    if tool == "inspect":
        if len(paths) != 1:
            raise SourceError(paths[1], "one Inspect log at a time")
        return InspectLog(paths[0])
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
    )


def cmd_import(args: argparse.Namespace) -> int:
    """Run one import; 0 when the report was issued, 2 on bad input or a refused request."""
    show = args.progress or (args.progress is None and sys.stderr.isatty())

    def progress(items: Iterable[T], **kwargs: Any) -> Iterable[T]:
        shown: Iterable[T] = tqdm(items, disable=not show, file=sys.stderr, **kwargs)
        return shown

    try:
        subject = parse_subject(args.subject)
        reader = reader_for(args.tool, [Path(p) for p in args.files])
        plan = build(reader, rule_options(args), args.suite, progress)
    except (SourceError, ValueError) as exc:
        print(f"evalbook import: {exc}", file=sys.stderr)
        return 2
    with plan.workdir:
        for note in plan.notes:
            print(f"note: {note}", file=sys.stderr)
        start = _start_body(args, subject, plan)
        if args.dry_run:
            return _dry_run(args, plan, start)
        try:
            client = EvalBookClient.from_environment(args.url, args.token)
            activation = inspect_activation(client, plan)
            activation_allowed(activation, args.activate)
            key = _start_key(args, plan, start)
            report = send(client, plan, start, key, show, activation.needed)
        except (ClientError, SourceError) as exc:
            print(f"evalbook import: {exc}", file=sys.stderr)
            return 2
    body = report["body"]
    print(f"evaluation {body['evaluation_id']}")
    print(f"report {report['report_id']}: {body['result']}")
    for check in body["checks"]:
        print(f"  {check['check_id']}: {check['status']} ({check.get('explanation', '')})")
    print(f"{client.base_url}/reports/{report['report_id']}")
    return 0


class ActivationRefused(ClientError):
    """Importing would activate a new suite version over the active one (superseding the
    current reports of other subjects), and `--activate` was not given."""


@dataclass
class Activation:
    """What importing does to the suite's active version: `active` is the suite's active
    version (None: no suite, or none active), `superseded` the current gate reports under it
    that activating the run's `version` would supersede."""

    suite: str
    version: str
    active: str | None
    superseded: list[dict[str, Any]]

    @property
    def needed(self) -> bool:
        """The run's version is not the active one."""
        return self.active != self.version

    @property
    def replaces(self) -> bool:
        """Activating would replace another active version (and supersede its reports)."""
        return self.needed and self.active is not None

    def refusal(self) -> str:
        """Why the import stops without `--activate`."""
        return (
            f"the suite {self.suite!r} has version {self.active} active; this run's options "
            f"make version {self.version}, and activating it would supersede "
            f"{len(self.superseded)} current report(s) of other subjects. Import into a suite "
            "of its own with --suite NAME, or pass --activate to activate it on purpose"
        )

    def summary(self) -> dict[str, Any]:
        """For a dry run's plan."""
        return {
            "active_version": self.active,
            "version": self.version,
            "activates": self.needed,
            "supersedes": [report["report_id"] for report in self.superseded],
        }


def _current_reports_of(client: EvalBookClient, suite: str, version: str) -> list[dict[str, Any]]:
    """The current gate reports issued under a suite version (activation supersedes them)."""
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"suite": suite, "status": "current", "mode": "gate", "limit": 200}
    while True:
        page = client.request("GET", "/evaluations/api/reports", params=params)
        found += [r for r in page["reports"] if r["body"]["suite_ref"]["version"] == version]
        if not page.get("next_cursor"):
            return found
        params["cursor"] = page["next_cursor"]


def inspect_activation(client: EvalBookClient, plan: ImportPlan) -> Activation:
    """What importing `plan` does to its suite's active version, asked of the service."""
    try:
        suite = client.request("GET", f"/api/v1/suites/{plan.suite_name}")
    except ClientError as exc:
        if exc.status != 404:
            raise
        suite = {}
    active = suite.get("active_version")
    superseded: list[dict[str, Any]] = []
    if active is not None and active != plan.suite_version:
        superseded = _current_reports_of(client, plan.suite_name, active)
    return Activation(plan.suite_name, plan.suite_version, active, superseded)


def activation_allowed(activation: Activation, activate: bool) -> None:
    """A new suite, or one with nothing active, is activated: nothing is superseded. One whose
    active version differs (the run's options changed its rule) only with `--activate`, which
    first prints every current report that is superseded."""
    if not activation.replaces:
        return
    if not activate:
        raise ActivationRefused(activation.refusal())
    print(
        f"activating version {activation.version} of {activation.suite!r} (replacing "
        f"{activation.active}) supersedes {len(activation.superseded)} current report(s):",
        file=sys.stderr,
    )
    for report in activation.superseded:
        body = report["body"]
        print(
            f"  {report['report_id']} {body['subject']['digest']} {body['result']}", file=sys.stderr
        )


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
) -> dict[str, Any]:
    """Definitions, the start, the cases and the finish; a refused batch cancels the evaluation.
    The suite version is activated only when `activate` (see `activation_allowed`)."""
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
    except (ClientError, SourceError) as exc:
        if isinstance(exc, ClientError) and (exc.status is None or exc.status >= 500):
            raise  # the service is out of reach: a re-run resumes the same evaluation
        client.request("POST", f"/api/v1/evaluations/{evaluation}/cancel")
        raise ClientError(
            f"{exc}\n(evaluation {evaluation} was cancelled)", getattr(exc, "status", None)
        ) from exc
    finished: dict[str, Any] = client.request("POST", f"/api/v1/evaluations/{evaluation}/finish")
    return finished


def _start_body(
    args: argparse.Namespace, subject: dict[str, Any], plan: ImportPlan
) -> dict[str, Any]:
    # A comparison's own default mode is `experiment` (a baseline run is one too); a gate
    # comparison is asked for by name.
    mode = args.mode or ("experiment" if args.baseline else "gate")
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
