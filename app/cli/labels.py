"""`evalbook labels requested|post`: what a judged check asks humans to label, and sending their
labels (docs/verdicts.md, section 13).

`requested` prints a table, or writes one JSON object a line (`--out file.jsonl`) that a
labeller fills in: each line already names its check and example, and `post` takes the same
lines back, ignoring what the service wrote for reading (`labelled`, `status`, `input`,
`output`) and skipping lines still without a `label`. A post is all or nothing, as the service
takes it."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.registry import Client, Command, Group
from app.domain import exits

if TYPE_CHECKING:  # httpx is imported when the command runs, not when the parser is built
    from app.cli.client import EvalBookClient

PAGE = 200  # the service's largest page
# What `requested` writes for the labeller to read, never sent back.
READ_ONLY = ("labelled", "status", "input", "output")


class LabelFileError(ValueError):
    """A labels file that cannot be sent: which line, and why."""


def requested(client: EvalBookClient, evaluation_id: str) -> dict[str, Any]:
    """Every page of an evaluation's requested labels, as one answer."""
    path = f"/api/v1/evaluations/{evaluation_id}/labels/requested"
    params: dict[str, Any] = {"limit": PAGE}
    answer: dict[str, Any] = client.request("GET", path, params=params)
    pages = [answer]
    while (cursor := pages[-1]["next_cursor"]) is not None:
        pages.append(client.request("GET", path, params={**params, "cursor": cursor}))
    return {
        "evaluation_id": answer["evaluation_id"],
        "totals": pages[-1]["totals"],
        "requested": [item for page in pages for item in page["requested"]],
    }


def table(answer: dict[str, Any], unlabelled_only: bool) -> str:
    """The requested examples as plain text, with each judged check's count still to label."""
    out = [f"evaluation {answer['evaluation_id']}"]
    for check_id, total in answer["totals"].items():
        missing = total["sampled"] - total["labelled"]
        out.append(
            f"  {check_id}: {total['labelled']} of {total['sampled']} sampled examples labelled, "
            f"{missing} to go"
        )
    out += ["", f"{'check':<24} {'example':<32} {'case':<8} labelled"]
    for item in answer["requested"]:
        if unlabelled_only and item["labelled"]:
            continue
        status = item["status"] or "—"
        mark = "yes" if item["labelled"] else "no"
        out.append(f"{item['check_id']:<24} {item['example_id']:<32} {status:<8} {mark}")
    return "\n".join(out) + "\n"


def template_lines(answer: dict[str, Any], unlabelled_only: bool) -> Iterator[str]:
    """One JSON object a line for a labeller: the service's fields and an empty label."""
    for item in answer["requested"]:
        if unlabelled_only and item["labelled"]:
            continue
        line = {"check_id": item["check_id"], "example_id": item["example_id"], "label": None}
        line |= {"labeller": None, "note": None}
        line |= {key: item[key] for key in READ_ONLY}
        yield json.dumps(line, ensure_ascii=False) + "\n"


def labels_of(path: Path, labeller: str | None) -> tuple[list[dict[str, Any]], int]:
    """The labels a file holds (JSON lines) and how many lines were skipped without a label."""
    labels, skipped = [], 0
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except ValueError as exc:
            raise LabelFileError(f"line {number} is not JSON: {exc}") from exc
        if not isinstance(line, dict):
            raise LabelFileError(f"line {number} is not a JSON object")
        if line.get("label") is None:
            skipped += 1
            continue
        label = {key: value for key, value in line.items() if key not in READ_ONLY}
        if label.get("note") is None:
            label.pop("note", None)
        if label.get("labeller") is None:
            if labeller is None:
                raise LabelFileError(f"line {number} names no labeller (or pass --labeller)")
            label["labeller"] = labeller
        labels.append(label)
    return labels, skipped


def _ndjson(labels: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(label, ensure_ascii=False).encode() + b"\n" for label in labels)


def _check_evaluation(name: str, evaluation_id: str) -> int | None:
    try:
        uuid.UUID(evaluation_id)
    except ValueError:
        print(f"{name}: {evaluation_id!r} is not an evaluation id", file=sys.stderr)
        return exits.USAGE
    return None


def cmd_requested(args: argparse.Namespace) -> int:
    """Print or write what to label (exit 0), or exit as app.domain.exits says (64 a wrong
    command line, 66 an unknown evaluation, 77 a refused token, 4 no answer)."""
    from app.cli.client import ClientError, EvalBookClient

    name = "evalbook labels requested"
    if (wrong := _check_evaluation(name, args.evaluation_id)) is not None:
        return wrong
    try:
        client = EvalBookClient.from_environment(args.url, args.token)
        answer = requested(client, args.evaluation_id)
    except ClientError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return exits.for_status(exc.status)
    if args.out is not None:
        lines = list(template_lines(answer, args.unlabelled))
        args.out.write_text("".join(lines), encoding="utf-8")
        print(f"{name}: {len(lines)} examples to label written to {args.out}", file=sys.stderr)
    if args.json:
        print(json.dumps(answer, indent=2, ensure_ascii=False))
    elif args.out is None:
        sys.stdout.write(table(answer, args.unlabelled))
    return exits.OK


def cmd_post(args: argparse.Namespace) -> int:
    """Send a file's labels (exit 0), or exit as app.domain.exits says (2 a file or labels the
    service refused, nothing stored; 64 a wrong command line; 66 no such file or evaluation;
    77 a token that may not label; 4 no answer)."""
    from app.cli.client import NDJSON, ClientError, EvalBookClient

    name = "evalbook labels post"
    if (wrong := _check_evaluation(name, args.evaluation_id)) is not None:
        return wrong
    try:
        labels, skipped = labels_of(args.file, args.labeller)
    except OSError as exc:
        print(f"{name}: {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return exits.NOT_FOUND
    except (LabelFileError, UnicodeDecodeError) as exc:
        print(f"{name}: {args.file}: {exc}", file=sys.stderr)
        return exits.REFUSED
    if not labels:
        print(f"{name}: {args.file} holds no label ({skipped} lines without one)", file=sys.stderr)
        return exits.REFUSED
    try:
        client = EvalBookClient.from_environment(args.url, args.token)
        answer = client.request(
            "POST",
            f"/api/v1/evaluations/{args.evaluation_id}/labels",
            content=_ndjson(labels),
            content_type=NDJSON,
        )
    except ClientError as exc:
        print(f"{name}: {exc}\n{name}: nothing was stored", file=sys.stderr)
        return exits.for_status(exc.status)
    answer["skipped"] = skipped
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print(
            f"{answer['accepted']} labels stored, {answer['unchanged']} already held, "
            f"{skipped} lines without a label skipped"
        )
    return exits.OK


def _requested_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("evaluation_id", help="the evaluation")
    parser.add_argument(
        "--out", type=Path, help="write one JSON line per example to label (a file to fill in)"
    )
    parser.add_argument(
        "--unlabelled", action="store_true", help="only the examples still without a label"
    )


def _post_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("evaluation_id", help="the evaluation")
    parser.add_argument(
        "file",
        type=Path,
        help="labels, one JSON object a line (check_id, example_id, label, "
        "labeller, note); lines without a label are skipped",
    )
    parser.add_argument("--labeller", help="the labeller of lines that name none")


COMMANDS: list[Command | Group] = [
    Group(("labels",), "human labels of judged checks: what to label, and sending labels"),
    Command(
        ("labels", "requested"),
        "the examples an evaluation's judged checks ask humans to label",
        cmd_requested,
        _requested_options,
        epilog="with dataset.read_body the file holds each example's input and output",
        client=Client("report.read or label.write", json="print the requested examples' JSON"),
    ),
    Command(
        ("labels", "post"),
        "send human labels for a running evaluation (all or nothing)",
        cmd_post,
        _post_options,
        epilog="the labels count only from a labeller token (evalbook token create --kind "
        "labeller)",
        client=Client("label.write", json="print the service's answer as JSON"),
    ),
]
