"""`evalbook diff A B`: what changed from report B (before) to report A (after), as a table and
the top regressions, or the diff's JSON. A diff is not a gate: it exits 0 whenever it answers."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import TYPE_CHECKING, Any

from app.cli.registry import Client, Command
from app.domain import exits

if TYPE_CHECKING:  # httpx is imported when the command runs, not when the parser is built
    from app.cli.client import EvalBookClient

SHOWN = 10


def report_diff(client: EvalBookClient, after: str, before: str) -> dict[str, Any]:
    """The service's diff of two reports."""
    found: dict[str, Any] = client.request("GET", f"/evaluations/api/reports/{after}/diff/{before}")
    return found


def _number(value: float | None, digits: str = ".4g") -> str:
    return "—" if value is None else format(value, digits)


def p_text(p: float) -> str:
    """A p-value as people read it: never `p = 0`."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3g}"


def regressions(check: dict[str, Any], limit: int = SHOWN) -> list[str]:
    """The check's worst regressions in words: pass -> fail examples, or the largest drops."""
    lines = []
    for drop in check.get("top_drops", [])[:limit]:
        if isinstance(drop.get("change"), float):
            lines.append(
                f"{drop['example_id']}: {drop['before']:.4g} -> {drop['after']:.4g} "
                f"({drop['change']:+.4g})"
            )
        else:
            lines.append(f"{drop['example_id']}: {drop['before']} -> {drop['after']}")
    return lines


def table(diff: dict[str, Any]) -> str:
    """The diff as a plain-text table and each check's top regressions."""
    after, before = diff["after"], diff["before"]
    out = [
        f"after:  {after['report_id']} ({after['result']}, {after['suite_ref']['name']} "
        f"v{after['suite_ref']['version']}, {after['issued_at']})",
        f"before: {before['report_id']} ({before['result']}, {before['suite_ref']['name']} "
        f"v{before['suite_ref']['version']}, {before['issued_at']})",
        "",
        f"{'check':<24} {'before':>9} {'after':>9} {'change':>9} {'p->f':>6} {'f->p':>6} "
        f"{'McNemar':>12}  paired difference [interval]",
    ]
    for check in diff["checks"]:
        b, a = check["before"] or {}, check["after"] or {}
        difference = check["difference"]
        interval = difference.get("interval") or {}
        spread = (
            f"{_number(difference['estimate'], '+.4g')} "
            f"[{_number(interval.get('lower'), '+.4g')}, {_number(interval.get('upper'), '+.4g')}]"
            if difference["estimate"] is not None
            else "—"
        )
        out.append(
            f"{check['check_id']:<24} {_number(b.get('score')):>9} {_number(a.get('score')):>9} "
            f"{_number(check['score_change'], '+.4g'):>9} {check['mcnemar']['b']:>6} "
            f"{check['mcnemar']['c']:>6} {p_text(check['mcnemar']['p_value']):>12}  {spread}"
        )
    unmatched = diff["unmatched_checks"]
    if unmatched["only_after"] or unmatched["only_before"]:
        out += [
            "",
            f"only in after: {', '.join(unmatched['only_after']) or '—'}; "
            f"only in before: {', '.join(unmatched['only_before']) or '—'}",
        ]
    for check in diff["checks"]:
        worst = regressions(check)
        if worst:
            out += ["", f"top regressions in {check['check_id']}:"]
            out += [f"  {line}" for line in worst]
    for judged in diff.get("labels") or []:
        out += ["", *label_lines(judged)]
    return "\n".join(out) + "\n"


def label_lines(judged: dict[str, Any], limit: int = SHOWN) -> list[str]:
    """A judged check's label changes in words: the judge's score and the labels on both sides,
    then each changed label."""
    b, a = judged["before"], judged["after"]
    lines = [
        f"labels of {judged['check_id']} (judged): {_number(b['labelled'])} -> "
        f"{_number(a['labelled'])} labelled; the judge's own score {_number(b['judge_score'])} -> "
        f"{_number(a['judge_score'])}, corrected {_number(b['score'])} -> {_number(a['score'])}",
        f"  {judged['changed_count']} changed, {judged['only_after_count']} labelled after only, "
        f"{judged['only_before_count']} before only, {judged['unchanged']} unchanged",
    ]
    for change in judged["changed"][:limit]:
        lines.append(
            f"  {change['example_id']}: {change['before']} ({change['labeller_before']}) -> "
            f"{change['after']} ({change['labeller_after']})"
        )
    return lines


def cmd_diff(args: argparse.Namespace) -> int:
    """Print the diff of two reports (exit 0), or exit as app.domain.exits says (64 a wrong command
    line, 66 an unknown report, 77 a refused token, 4 no answer)."""
    from app.cli.client import ClientError, EvalBookClient

    ids = []
    for name in (args.after, args.before):
        try:
            ids.append(uuid.UUID(name))
        except ValueError:
            print(f"evalbook diff: {name!r} is not a report id", file=sys.stderr)
            return exits.USAGE
    if ids[0] == ids[1]:
        print("evalbook diff: AFTER and BEFORE are the same report", file=sys.stderr)
        return exits.USAGE
    try:
        client = EvalBookClient.from_environment(args.url, args.token)
        diff = report_diff(client, args.after, args.before)
    except ClientError as exc:
        code = exits.for_status(exc.status)
        if code == exits.NOT_FOUND:
            print(f"evalbook diff: no such report in the token's project ({exc})", file=sys.stderr)
        else:
            print(f"evalbook diff: {exc}", file=sys.stderr)
        return code
    if args.json:
        print(json.dumps(diff, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(table(diff))
    return 0


def _options(diff: argparse.ArgumentParser) -> None:
    diff.add_argument("after", help="the newer report's id")
    diff.add_argument("before", help="the older report's id")


COMMANDS = [
    Command(
        ("diff",),
        "what changed between two reports (exit 0: a diff is not a gate)",
        cmd_diff,
        _options,
        epilog="exits 0 whenever the diff is answered, whatever it shows",
        client=Client("report.read", json="print the diff's JSON"),
    )
]
