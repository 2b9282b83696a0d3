"""`evalbook export REPORT --format F`: a report in one of the ecosystem's formats, to a file
or stdout: the signed in-toto test result, a model card's model-index, a CycloneDX ML-BOM, or
JUnit XML (the gate's, for this one report)."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.registry import Client, Command
from app.domain import exits

if TYPE_CHECKING:  # httpx is imported when the command runs, not when the parser is built
    from app.cli.client import EvalBookClient

FORMATS = ("test-result", "model-index", "cyclonedx", "junit")


def exported(client: EvalBookClient, report_id: str, export_format: str) -> bytes:
    """The report in `export_format`, as the service (or, for JUnit, the gate) writes it."""
    reports = f"/evaluations/api/reports/{report_id}"
    if export_format == "test-result":
        return client.fetch(f"{reports}/attestation", params={"predicate": "test-result"})
    if export_format == "junit":
        from app.cli.gate import decide, junit

        report: dict[str, Any] = client.request("GET", reports)
        subject = str(report["body"]["subject"]["digest"])
        return junit(decide(subject, [report], None, None))
    return client.fetch(f"{reports}/exports/{export_format}")


def _refused(args: argparse.Namespace, message: str, code: int, status: int | None) -> int:
    """Say why the export failed (JSON on stderr with --json) and give the exit status."""
    if args.json:
        error = {"error": message, "http_status": status, "exit": code}
        print(json.dumps(error, ensure_ascii=False), file=sys.stderr)
    else:
        print(f"evalbook export: {message}", file=sys.stderr)
    return code


def cmd_export(args: argparse.Namespace) -> int:
    """Write the export (exit 0), or exit as app.domain.exits says (64 a wrong command line, 66 an
    unknown report, 77 a refused token, 4 no answer)."""
    from app.cli.client import ClientError, EvalBookClient

    try:
        report_id = str(uuid.UUID(args.report))
    except ValueError:
        return _refused(args, f"{args.report!r} is not a report id", exits.USAGE, None)
    try:
        client = EvalBookClient.from_environment(args.url, args.token)
        data = exported(client, report_id, args.format)
    except ClientError as exc:
        code = exits.for_status(exc.status)
        message = str(exc)
        if code == exits.NOT_FOUND:
            message = f"no such report in the token's project ({exc})"
        return _refused(args, message, code, exc.status)
    if args.output in (None, "-"):
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        Path(args.output).write_bytes(data)
    return exits.OK


def _options(export: argparse.ArgumentParser) -> None:
    export.add_argument("report", help="the report's id")
    export.add_argument("--format", required=True, choices=FORMATS, help="what to write")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")


COMMANDS = [
    Command(
        ("export",),
        "a report as an in-toto test result, a model-index, a CycloneDX BOM or JUnit XML",
        cmd_export,
        _options,
        client=Client("report.read", json="errors as JSON on stderr"),
    )
]
