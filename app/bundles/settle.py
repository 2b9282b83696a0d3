"""What can only be told at the end of a bundle: presence, explanations, evidence, replay."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.bundles.verify import Verifier


def settle(verifier: Verifier, last_line: int) -> None:
    """Everything that needs the whole bundle: presence, explanations, evidence, replay."""
    verifier.close_dataset()
    verifier.outcome.lines = last_line
    if not verifier.trailer_seen:
        verifier.fail(
            last_line, "no_trailer", f"the stream ends at line {last_line} without a trailer"
        )
    if not verifier.body or not verifier.suite:
        verifier.fail(last_line, "missing_line", "the report or suite_version line is missing")
        return
    for ref in verifier.body.get("dataset_refs", []):
        if ref["digest"] not in verifier.datasets:
            verifier.fail(
                last_line,
                "missing_line",
                f"no dataset_version line for {ref['name']} {ref['version']}",
            )
    for check in verifier.body.get("checks", []):
        if check["check_id"] not in verifier.check_lines:
            verifier.fail(last_line, "missing_line", f"no check line for {check['check_id']!r}")
    items = verifier.items["unavailable"] + verifier.items["redacted"]
    by_what: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_what.setdefault(item["what"], []).append(item)
    _explain_scorers(verifier, last_line, by_what)
    _explain_bodies(verifier, by_what)
    traces = {
        (i["ref"].get("kind"), i["ref"].get("check_id")) for i in by_what.get("trace_bodies", [])
    }
    for kind, check_id in sorted(verifier.traced - traces):
        verifier.fail(
            last_line,
            "unexplained",
            f"{kind}s of {check_id!r} carry trace refs but no trace_bodies item",
        )
    limited = {(i["ref"].get("kind"), i["ref"].get("check_id")) for i in by_what.get("cases", [])}
    _evidence(verifier, limited)
    if verifier.replay:
        from app.bundles.replay import replay

        if limited:
            verifier.outcome.replay = "not run: cases were left out (case_limit)"
        else:
            verifier.outcome.replay = replay(verifier)


def _explain_scorers(
    verifier: Verifier, last_line: int, by_what: dict[str, list[dict[str, Any]]]
) -> None:
    missing = {
        (i["ref"].get("name"), i["ref"].get("version")) for i in by_what.get("scorer_version", [])
    }
    for key in sorted(verifier.pinned):
        if key not in verifier.scorer_lines and key not in missing:
            verifier.fail(
                last_line,
                "unexplained",
                f"pinned scorer {key[0]} {key[1]} has no line and no unavailable item",
            )


def _explain_bodies(verifier: Verifier, by_what: dict[str, list[dict[str, Any]]]) -> None:
    removed = {
        (i["ref"].get("dataset"), i["ref"].get("example_id"))
        for i in by_what.get("example_body", [])
    }
    withheld = {i["ref"].get("dataset") for i in by_what.get("example_bodies", [])}
    for line_no, dataset, example_id in verifier.absent_bodies:
        if (dataset, example_id) not in removed and dataset not in withheld:
            verifier.fail(
                line_no,
                "unexplained",
                f"example {example_id!r} has no body and no redacted or unavailable item",
            )
        else:
            verifier.outcome.proven["absent_body_explained"] += 1


def _evidence(verifier: Verifier, limited: set[tuple[str, str]]) -> None:
    body_checks = {c["check_id"]: c for c in verifier.body.get("checks", [])}
    for check_id, (line_no, rebuilt) in verifier.evidence.items():
        if ("case", check_id) in limited or check_id not in body_checks:
            continue
        refs = body_checks[check_id].get("evidence_refs", [])
        if body_checks[check_id].get("evidence_manifest"):
            verifier.equal(
                line_no,
                "evidence",
                f"check {check_id!r} evidence rebuilt from its cases vs the manifest",
                refs[0] if refs else None,
                rebuilt.digest(),
            )
        else:
            verifier.equal(
                line_no,
                "evidence",
                f"check {check_id!r} evidence rebuilt from its cases",
                refs,
                rebuilt.entries,
            )
