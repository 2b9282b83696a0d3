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


def reader_for(tool: str, paths: list[Path]) -> Reader:
    """The reader of a tool's files."""
    for path in paths:
        if not path.is_file():
            raise SourceError(path, "no such file")
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


def rule_options(args: argparse.Namespace) -> RuleOptions:
    """The suite-rule options, checked."""
    check_thresholds = {}
    for item in args.check_threshold:
        check_id, sep, value = item.rpartition("=")
        if not sep:
            raise ValueError("--check-threshold: CHECK=VALUE")
        check_thresholds[check_id] = float(value)
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
        return tqdm(items, disable=not show, file=sys.stderr, **kwargs)

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
            print(json.dumps({**plan.summary(), "evaluation": start}, indent=2))
            return 0
        try:
            client = EvalBookClient.from_environment(args.url, args.token)
            report = send(client, plan, start, _start_key(args, plan, start), show)
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


def send(
    client: EvalBookClient,
    plan: ImportPlan,
    start: dict[str, Any],
    key: str,
    show: bool,
) -> dict[str, Any]:
    """Definitions, the start, the cases and the finish; a refused batch cancels the evaluation."""
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
    if client.request("GET", suite_path).get("active_version") != plan.suite_version:
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
    body: dict[str, Any] = {
        "subject": subject,
        "suite": {"name": plan.suite_name, "version": plan.suite_version},
        "mode": args.mode,
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
