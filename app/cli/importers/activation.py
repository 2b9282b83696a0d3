"""What an import does to its suite's active version: asked of the service before anything
is sent, refused (naming what differs) when it would supersede other subjects' reports."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from app.cli.client import ClientError, EvalBookClient
from app.cli.importers.plan import ImportPlan


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
    # What differs between the active version's content and this run's (field: active → run).
    differences: list[str] = field(default_factory=list)

    @property
    def needed(self) -> bool:
        """The run's version is not the active one."""
        return self.active != self.version

    @property
    def replaces(self) -> bool:
        """Activating would replace another active version (and supersede its reports)."""
        return self.needed and self.active is not None

    def refusal(self) -> str:
        """Why the import stops without `--activate`, naming what differs."""
        shown = self.differences[:SHOWN_DIFFERENCES]
        more = len(self.differences) - len(shown)
        differs = "".join(f"\n  {line}" for line in shown) + (
            f"\n  … and {more} more" if more > 0 else ""
        )
        return (
            f"the suite {self.suite!r} has version {self.active} active; this run makes "
            f"version {self.version}, which differs in (active → this run):{differs or ' —'}\n"
            f"Activating it would supersede {len(self.superseded)} current report(s) of other "
            "subjects. Import into a suite of its own with --suite NAME, or pass --activate to "
            "activate it on purpose"
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
    differences: list[str] = []
    if active is not None and active != plan.suite_version:
        superseded = _current_reports_of(client, plan.suite_name, active)
        stored = client.request("GET", f"/api/v1/suites/{plan.suite_name}/versions/{active}")
        differences = suite_differences(stored["content"], plan.suite_body)
    return Activation(plan.suite_name, plan.suite_version, active, superseded, differences)


SHOWN_DIFFERENCES = 12


def suite_differences(stored: Any, sent: Any, where: str = "") -> list[str]:
    """The fields of `sent` (this run's suite body) whose value differs in `stored` (the
    active version's frozen content, which adds fields of its own); checks matched by id."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        found: list[str] = []
        for key, value in sent.items():
            path = f"{where}.{key}" if where else key
            if key not in stored:
                found.append(f"{path}: (none) → {_short(value)}")
            else:
                found += suite_differences(stored[key], value, path)
        return found
    if where == "checks" and isinstance(sent, list) and isinstance(stored, list):
        return _check_differences(stored, sent)
    if stored != sent:
        return [f"{where}: {_short(stored)} → {_short(sent)}"]
    return []


def _check_differences(stored: list[Any], sent: list[Any]) -> list[str]:
    """The suite's checks compared by id: which are on one side only, then each one's fields."""
    before = {c.get("check_id"): c for c in stored if isinstance(c, dict)}
    after = {c.get("check_id"): c for c in sent if isinstance(c, dict)}
    found = [f"checks: {c} only in the active version" for c in before if c not in after]
    found += [f"checks: {c} only in this run" for c in after if c not in before]
    for check_id, check in after.items():
        if check_id in before:
            found += suite_differences(before[check_id], check, f"checks[{check_id}]")
    if not found and list(before) != list(after):
        found.append("checks: the same checks in another order")
    return found


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "…"


def activation_allowed(activation: Activation, activate: bool) -> None:
    """A new suite, or one with nothing active, is activated: nothing is superseded. One whose
    active version differs (the run's options changed its rule) only with `--activate`, which
    first prints every current report that is superseded."""
    if not activation.replaces:
        return
    if not activate:
        raise ActivationRefused(activation.refusal(), 409)  # refused as a conflict: exit 2
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
