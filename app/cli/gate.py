"""`evalbook gate`: what the current reports say about a subject, as a CI job's exit status,
JUnit XML and a Markdown summary.

Exit status: 0 when every named suite's current report passes; 1 when one fails; 3 when one
is missing (no current report); 2 when one is error or inconclusive, or weaker than the
assurance asked for; 4 when the service cannot answer; 64 when the command line is wrong;
69 when `--verify-log` finds the service cannot be trusted (app/cli/gate_log.py).
Several at once: fail wins, then missing, then the rest. JUnit XML and the summary are
written on every exit the gate itself decides (4 and 64 included), so a CI job always has
them to show."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.cli.client import ClientError, EvalBookClient
from app.cli.gate_regressions import Regressions, find_regressions
from app.cli.importers.source import identifier
from app.domain import exits
from app.domain.identifiers import IDENTIFIER_RE, SUBJECT_DIGEST_RE
from app.domain.measure_text import amount, measure_sentence
from app.domain.vocabulary import ASSURANCE_LEVELS

EXIT = {
    "pass": exits.OK,
    "fail": exits.FAILED,
    "error": exits.REFUSED,
    "inconclusive": exits.REFUSED,
    "missing": exits.MISSING,
    "unanswered": exits.UNAVAILABLE,
}
USAGE_ERROR = 64

# Which outcome decides when several suites disagree.
PRECEDENCE = ("fail", "missing", "error", "inconclusive", "pass")


@dataclass
class SuiteOutcome:
    """One suite's verdict about the subject, as the gate reads it."""

    suite: str
    outcome: str
    why: str
    report: dict[str, Any] | None = None
    # The worst regressions of its failed or inconclusive checks (app/cli/gate_regressions.py).
    regressions: Regressions | None = None


@dataclass
class GateOutcome:
    """Every suite's outcome and the exit status they give."""

    subject: str
    suites: list[SuiteOutcome] = field(default_factory=list)
    # Why the gate could not decide at all (the service did not answer, a bad option).
    unanswered: str | None = None
    exit_override: int | None = None

    @property
    def outcome(self) -> str:
        """The deciding outcome (PRECEDENCE), or `unanswered`."""
        if self.unanswered is not None:
            return "unanswered"
        found = {s.outcome for s in self.suites} or {"missing"}
        return next(o for o in PRECEDENCE if o in found)

    @property
    def exit_status(self) -> int:
        """0 pass, 1 fail, 2 error or inconclusive, 3 missing, 4 no answer, 64 bad usage."""
        return self.exit_override if self.exit_override is not None else EXIT[self.outcome]


def decide(
    subject: str,
    reports: list[dict[str, Any]],
    suites: list[str] | None,
    require_assurance: str | None,
) -> GateOutcome:
    """The gate's outcome from `forSubject`'s reports (every suite there, or the named ones)."""
    by_suite = {r["body"]["suite_ref"]["name"]: r for r in reports}
    gate = GateOutcome(subject)
    for suite in suites or sorted(by_suite):
        report = by_suite.get(suite)
        if report is None:
            gate.suites.append(SuiteOutcome(suite, "missing", "no current report"))
            continue
        body = report["body"]
        result = body["result"]
        why = "; ".join(_reason(r, body) for r in body.get("reasons", [])) or _passed(body)
        if result == "pass" and require_assurance is not None:
            levels = list(ASSURANCE_LEVELS)
            if levels.index(body["assurance"]) < levels.index(require_assurance):
                result = "inconclusive"
                why = f"assurance {body['assurance']} is weaker than {require_assurance}"
        gate.suites.append(SuiteOutcome(suite, result, why, report))
    return gate


def _passed(body: dict[str, Any]) -> str:
    checks = body.get("checks", [])
    return f"every required check passed ({len(checks)} checks)" if checks else "passed"


def _reason(reason: dict[str, Any], body: dict[str, Any]) -> str:
    """A reason in plain words: the check's own explanation, never an internal code."""
    check_id = reason.get("check_id")
    if reason.get("code") == "evidence_incomplete":
        missing, undigested = reason.get("missing", 0), reason.get("undigested", 0)
        parts = [f"{missing} case(s) not executed"] if missing else []
        parts += [f"{undigested} output(s) without a digest"] if undigested else []
        return f"{check_id}: the evidence is incomplete ({', '.join(parts) or 'cases missing'})"
    check: dict[str, Any] = next(
        (c for c in body.get("checks", []) if c.get("check_id") == check_id), {}
    )
    explanation = check.get("explanation") or f"the check's result is {check.get('result')}"
    return f"{check_id}: {explanation}"


def junit(gate: GateOutcome) -> bytes:
    """JUnit XML: a test suite per suite, a test case per check (a missing report: one case):
    a failure per failed required check, an error per required check in error, a skipped
    entry per inconclusive check and per optional check that did not pass; a gate that could
    not decide: one test case in error saying why."""
    root = ET.Element("testsuites", name=f"evalbook gate {gate.subject}")
    if gate.unanswered is not None:
        element = ET.SubElement(root, "testsuite", name="evalbook gate", tests="1", errors="1")
        element.set("failures", "0")
        element.set("skipped", "0")
        case = ET.SubElement(element, "testcase", name="gate", classname="evalbook")
        ET.SubElement(case, "error", message=gate.unanswered, type="unanswered")
    for suite in gate.suites:
        element = ET.SubElement(root, "testsuite", name=suite.suite)
        checks = suite.report["body"]["checks"] if suite.report else []
        failures = errors = skipped = 0
        if not checks:
            case = ET.SubElement(element, "testcase", name="report", classname=suite.suite)
            ET.SubElement(case, "failure", message=suite.why, type=suite.outcome)
            failures += 1
        for check in checks:
            case = ET.SubElement(element, "testcase", name=check["check_id"], classname=suite.suite)
            result, explanation = check["result"], check.get("explanation", "")
            worst = _worst(suite, check["check_id"])
            if result in ("fail", "error") and not check.get("required", True):
                # An optional check does not decide the gate: it must not turn the job red.
                message = f"not required: {result}: {explanation}"
                ET.SubElement(case, "skipped", message=message).text = worst
                skipped += 1
            elif result == "fail":
                ET.SubElement(case, "failure", message=explanation, type="fail").text = worst
                failures += 1
            elif result == "error":
                ET.SubElement(case, "error", message=explanation, type="error")
                errors += 1
            elif result != "pass":
                skip = ET.SubElement(case, "skipped", message=f"{result}: {explanation}")
                skip.text = worst
                skipped += 1
        element.set("tests", str(max(len(checks), 1)))
        element.set("failures", str(failures))
        element.set("errors", str(errors))
        element.set("skipped", str(skipped))
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document


def _worst(suite: SuiteOutcome, check_id: str) -> str | None:
    """A check's top regressions as text (JUnit), or None."""
    found = suite.regressions
    if found is None or check_id not in found.by_check:
        return None
    lines = "\n".join(f"  {line}" for line in found.by_check[check_id])
    return f"Top regressions against the {found.against} {found.against_id}:\n{lines}"


def _regression_lines(found: Regressions | None) -> list[str]:
    """Markdown: each check's top regressions."""
    lines: list[str] = []
    for check_id, worst in found.by_check.items() if found else []:
        assert found is not None
        lines += [
            "",
            f"**Top regressions in {check_id}** against the {found.against} `{found.against_id}`:",
            "",
            *(f"- {line}" for line in worst),
        ]
    return lines


def _interval(check: dict[str, Any]) -> str:
    interval = check.get("interval")
    if not interval:
        return "—"
    ends = (amount(interval["lower"]), amount(interval["upper"]))
    return f"[{ends[0]}, {ends[1]}] ({interval['method']})"


def summary(gate: GateOutcome) -> str:
    """A Markdown summary, fit for a CI job's summary page."""
    lines = [f"## EvalBook gate: {gate.outcome} (`{gate.subject}`)", ""]
    if gate.unanswered is not None:
        return "\n".join([*lines, f"The gate could not decide: {gate.unanswered}", ""])
    lines += ["| suite | result | why | report |", "| --- | --- | --- | --- |"]
    for suite in gate.suites:
        url = suite.report["envelope"]["url"] if suite.report else ""
        link = f"[{suite.report['report_id'][:8]}]({url})" if suite.report else "—"
        lines.append(f"| {suite.suite} | **{suite.outcome}** | {suite.why} | {link} |")
    for suite in gate.suites:
        if not suite.report:
            continue
        lines += ["", f"### {suite.suite}", ""]
        lines += [
            "| check | result | score | interval | comparison |",
            "| --- | --- | --- | --- | --- |",
        ]
        for check in suite.report["body"]["checks"]:
            comparison = check.get("comparison")
            compared = (
                f"p = {comparison['p_value']:.3g}, adjusted {comparison['p_adjusted']:.3g}"
                if comparison
                else "—"
            )
            score = measure_sentence(check) or (
                "—" if check.get("score") is None else f"{check['score']:.4g}"
            )
            lines.append(
                f"| {check['check_id']} | {check['result']} | {score} | {_interval(check)} "
                f"| {compared} |"
            )
        found = suite.regressions
        for check_id, worst in found.by_check.items() if found else []:
            lines += [
                "",
                f"**Top regressions in {check_id}** against the {found.against} "  # type: ignore[union-attr]
                f"`{found.against_id}`:",  # type: ignore[union-attr]
                "",
            ]
            lines += [f"- {line}" for line in worst]
    return "\n".join(lines) + "\n"


def wait_for(
    client: EvalBookClient, subject: str, suites: list[str], seconds: float
) -> list[dict[str, Any]]:
    """forSubject's reports, asked again until every named suite has one or time runs out."""
    deadline = time.monotonic() + seconds
    delay = 1.0
    while True:
        reports = client.for_subject(subject)
        named = {r["body"]["suite_ref"]["name"] for r in reports}
        if set(suites) <= named or time.monotonic() >= deadline:
            return reports
        time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
        delay = min(delay * 2, 10.0)


def _usage_problem(args: argparse.Namespace) -> str | None:
    if SUBJECT_DIGEST_RE.fullmatch(args.subject) is None:
        return (
            f"--subject {args.subject!r}: a digest is ALGORITHM:HEX in lower case, e.g. "
            "sha1:4f1c0a7e9b2d3c5e6f708192a3b4c5d6e7f80912"
        )
    if args.require_assurance is not None and args.require_assurance not in ASSURANCE_LEVELS:
        return f"--require-assurance: one of {', '.join(ASSURANCE_LEVELS)}"
    for suite in args.suite:
        if IDENTIFIER_RE.fullmatch(suite) is None:
            named = identifier(suite)
            return (
                f"--suite {suite!r}: a suite's name is letters, digits and _ . : - "
                f"(the import said which name it used; did you mean {named!r}?)"
            )
    if args.wait < 0:
        return "--wait: seconds, zero or more"
    if args.log_wait < 0:
        return "--log-wait: seconds, zero or more"
    return None


def _decided(args: argparse.Namespace) -> GateOutcome:
    problem = _usage_problem(args)
    if problem is not None:
        return GateOutcome(args.subject, unanswered=problem, exit_override=USAGE_ERROR)
    try:
        client = EvalBookClient.from_environment(args.url, args.token)
        if args.wait and args.suite:
            reports = wait_for(client, args.subject, args.suite, args.wait)
        else:
            reports = client.for_subject(args.subject)
    except ClientError as exc:
        code = exits.for_status(exc.status)
        said = "did not answer" if code == exits.UNAVAILABLE else "refused the gate"
        return GateOutcome(
            args.subject, unanswered=f"the service {said}: {exc}", exit_override=code
        )
    if args.verify_log:
        distrust = _log_distrust(client, reports, args)
        if distrust is not None:
            return distrust
    gate = decide(args.subject, reports, args.suite or None, args.require_assurance)
    for suite in gate.suites:
        if suite.report is not None and suite.outcome in ("fail", "inconclusive"):
            # The regressions explain; they never change the gate's outcome.
            with contextlib.suppress(ClientError):
                suite.regressions = find_regressions(client, suite.report)
    return gate


def _log_distrust(
    client: EvalBookClient, reports: list[dict[str, Any]], args: argparse.Namespace
) -> GateOutcome | None:
    """None when every report is signed and proven in the log; else the gate's refusal."""
    import httpx

    from app.cli.gate_log import (
        DEFAULT_STATE,
        SECURITY_ERROR,
        LogCheck,
        SecurityError,
        verify_reports,
    )

    check = LogCheck(
        Path(args.log_state) if args.log_state else DEFAULT_STATE,
        args.log_key,
        Path(args.keys) if args.keys else None,
        args.log_wait,
    )
    try:
        verify_reports(client.base_url, client.token, reports, check)
    except SecurityError as exc:
        return GateOutcome(
            args.subject, unanswered=f"SECURITY ERROR: {exc}", exit_override=SECURITY_ERROR
        )
    except (httpx.HTTPError, ValueError) as exc:
        return GateOutcome(args.subject, unanswered=f"the log did not answer: {exc}")
    return None


def cmd_gate(args: argparse.Namespace) -> int:
    """Ask forSubject, write JUnit XML and a summary if asked (whatever the outcome), exit with
    the gate's status."""
    gate = _decided(args)
    if args.junit:
        Path(args.junit).write_bytes(junit(gate))
    if args.summary:
        Path(args.summary).write_text(summary(gate))
    if gate.unanswered is not None:
        print(f"evalbook gate: {gate.unanswered}", file=sys.stderr)
    for suite in gate.suites:
        print(f"{suite.suite}: {suite.outcome} ({suite.why})")
    print(f"gate: {gate.outcome}")
    return gate.exit_status
