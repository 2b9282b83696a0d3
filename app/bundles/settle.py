"""What can only be told at the end of a bundle: presence, every absence explained by exactly
one item, the cases trees, the signature, the evidence lists, and replay."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from app.bundles.admission import Reading
from app.bundles.dataset_checks import close_dataset
from app.bundles.facts import Facts
from app.bundles.label_checks import settle_labels
from app.bundles.log_check import LogPolicy, settle_log
from app.bundles.log_status import settle_status_log
from app.bundles.results import (
    Failure,
    Finding,
    Outcome,
    Proven,
    compared,
    failure,
    record_findings,
    recorded,
)
from app.bundles.signature import Trust, settle_signature, settle_supersessions
from app.bundles.test_result_check import settle_test_result
from app.bundles.trees import settle_trees

Key = tuple[Any, ...]


@dataclass(frozen=True)
class Settling:
    """How to settle: the keys trusted, the log's policy, and whether to replay."""

    trust: Trust
    log_policy: LogPolicy
    replay: bool = False


def settle(facts: Facts, reading: Reading, how: Settling, outcome: Outcome, last_line: int) -> None:
    """Everything that needs the whole bundle, recorded in `outcome`."""

    def record(findings: Iterable[Finding]) -> None:
        record_findings(outcome, findings)

    record(close_dataset(facts))
    header = facts.header
    outcome.lines = last_line
    outcome.report_id = None if header is None else header.report_id
    outcome.report_digest = facts.body_digest or None
    record(_presence(facts, reading, last_line))
    if not facts.body or not facts.suite:
        return
    record(_baseline(facts))
    by_what: dict[str, list[dict[str, Any]]] = {}
    for item in facts.items["unavailable"] + facts.items["redacted"]:
        by_what.setdefault(item["what"], []).append(item)
    record(_explain_scorers(facts, last_line, by_what.get("scorer_version", [])))
    record(_explain_bodies(facts, by_what))
    record(_explain_outputs(facts, by_what))
    record(_explain_traces(facts, last_line, by_what.get("trace_bodies", [])))
    limits: dict[Key, dict[str, Any]] = {}
    record(_limits(facts, by_what.get("cases", []), limits))
    record(settle_trees(facts, limits))
    record(settle_labels(facts))
    record(_evidence(facts, {key for key in limits if key[0] == "case"}))
    outcome.signer = recorded(outcome, settle_signature(facts, how.trust))
    record(settle_test_result(facts, how.trust, outcome.signer))
    status = recorded(outcome, settle_supersessions(facts, how.trust))
    if status is not None:
        outcome.status = status
    outcome.log = recorded(outcome, settle_log(facts, how.log_policy))
    status = recorded(outcome, settle_status_log(facts, how.log_policy, outcome.status))
    if status is not None:
        outcome.status = status
    if how.replay:
        outcome.replay = recorded(outcome, _replay(facts, last_line, bool(limits)))


def _presence(facts: Facts, reading: Reading, last_line: int) -> Iterator[Finding]:
    """The trailer, the report and suite lines, a line per dataset and per check of the body."""
    if not reading.trailer_seen:
        yield failure(
            last_line, "no_trailer", f"the stream ends at line {last_line} without a trailer"
        )
    if not facts.body or not facts.suite:
        yield failure(last_line, "missing_line", "the report or suite_version line is missing")
        return
    for ref in facts.body.get("dataset_refs", []):
        if ref["digest"] not in facts.datasets:
            yield failure(
                last_line,
                "missing_line",
                f"no dataset_version line for {ref['name']} {ref['version']}",
            )
    for check in facts.body.get("checks", []):
        if check["check_id"] not in facts.check_lines:
            yield failure(last_line, "missing_line", f"no check line for {check['check_id']!r}")


def _repeated(item: dict[str, Any], key: Key, seen: set[Key]) -> Failure | None:
    """None the first time an item explains `key`; a second item for it is a failure."""
    if key in seen:
        return failure(item["line"], "item", f"a second {item['what']} item for {key}")
    seen.add(key)
    return None


def _baseline(facts: Facts) -> Iterator[Finding]:
    """Every comparison names the header's baseline evaluation."""
    expected = None if facts.header is None else facts.header.baseline_evaluation_id
    for check in facts.body.get("checks", []):
        for part in (check, *(check.get("slices") or [])):
            comparison = part.get("comparison")
            if type(comparison) is dict:
                yield compared(
                    1,
                    "baseline",
                    f"the header's baseline_evaluation_id vs {check['check_id']!r}'s comparison",
                    comparison.get("baseline_evaluation_id"),
                    expected,
                )


def _explain_scorers(
    facts: Facts, last_line: int, items: list[dict[str, Any]]
) -> Iterator[Finding]:
    explained: set[Key] = set()
    for item in items:
        ref = item["ref"]
        key = (ref["name"], ref["version"])
        if key not in facts.pinned or facts.pinned[key] != ref["digest"]:
            yield failure(item["line"], "item", f"scorer {key} is not pinned by the suite")
        elif key in facts.scorer_lines:
            yield failure(item["line"], "item", f"scorer {key} has a line: nothing is absent")
        elif (repeated := _repeated(item, key, explained)) is not None:
            yield repeated
    for key in sorted(facts.pinned):
        if key not in facts.scorer_lines and key not in explained:
            yield failure(
                last_line,
                "unexplained",
                f"pinned scorer {key[0]} {key[1]} has no line and no unavailable item",
            )


def _explain_bodies(facts: Facts, by_what: dict[str, list[dict[str, Any]]]) -> Iterator[Finding]:
    absent = {(dataset, example_id) for _, dataset, example_id in facts.absent_bodies}
    removed: set[Key] = set()
    for item in by_what.get("example_body", []):
        key = (item["ref"]["dataset"], item["ref"]["example_id"])
        if key not in absent:
            yield failure(item["line"], "item", f"example {key} is not an example without body")
        elif (repeated := _repeated(item, key, removed)) is not None:
            yield repeated
    left = Counter(d for d, e in absent if (d, e) not in removed)
    withheld: set[Key] = set()
    for item in by_what.get("example_bodies", []):
        dataset = item["ref"]["dataset"]
        if (repeated := _repeated(item, (dataset,), withheld)) is not None:
            yield repeated
        else:
            yield compared(
                item["line"],
                "item",
                f"dataset {dataset}: bodies withheld",
                left[dataset],
                item["count"],
            )
    for line_no, dataset, example_id in facts.absent_bodies:
        if (dataset, example_id) not in removed and (dataset,) not in withheld:
            yield failure(
                line_no,
                "unexplained",
                f"example {example_id!r} has no body and no redacted or unavailable item",
            )
        else:
            yield Proven("absent_body_explained")


def _explain_outputs(facts: Facts, by_what: dict[str, list[dict[str, Any]]]) -> Iterator[Finding]:
    absent = facts.absent_outputs
    explained: set[Key] = set()
    for item in by_what.get("case_output", []):
        ref = item["ref"]
        key = (ref["kind"], ref["check_id"], ref["example_id"], int(ref["repeat"]))
        if key not in absent:
            yield failure(item["line"], "item", f"case {key} is not a case without its output")
        elif absent[key][1] != item["digest"]:
            yield failure(
                item["line"],
                "item",
                f"case {key}: the item's digest",
                absent[key][1],
                item["digest"],
            )
        elif item["reason"] == "stored_at_sso" and not item["object_key"].endswith(
            "/" + item["digest"].removeprefix("sha256:") + ".json"
        ):
            yield failure(item["line"], "item", f"case {key}: its object_key names another output")
        elif (repeated := _repeated(item, key, explained)) is not None:
            yield repeated
    left: Counter[Key] = Counter(case[:2] for case in absent if case not in explained)
    withheld: set[Key] = set()
    for item in by_what.get("case_outputs", []):
        pair = (item["ref"]["kind"], item["ref"]["check_id"])
        if (repeated := _repeated(item, pair, withheld)) is not None:
            yield repeated
        else:
            yield compared(
                item["line"],
                "item",
                f"{pair[0]}s of {pair[1]!r}: outputs withheld",
                left[pair],
                item["count"],
            )
    for case, (line_no, _) in absent.items():
        if case not in explained and case[:2] not in withheld:
            yield failure(
                line_no,
                "unexplained",
                f"{case[0]} {case[1]}/{case[2]}/{case[3]} has no output and no item saying why",
            )
        else:
            yield Proven("absent_output_explained")


def _explain_traces(facts: Facts, last_line: int, items: list[dict[str, Any]]) -> Iterator[Finding]:
    explained: set[Key] = set()
    for item in items:
        key = (item["ref"]["kind"], item["ref"]["check_id"])
        if (repeated := _repeated(item, key, explained)) is not None:
            yield repeated
        else:
            yield compared(
                item["line"],
                "item",
                f"{key[0]}s of {key[1]!r} with trace refs",
                facts.traced_counts.get(key, 0),
                item["count"],
            )
    for kind, check_id in sorted(facts.traced_counts):
        if (kind, check_id) not in explained:
            yield failure(
                last_line,
                "unexplained",
                f"{kind}s of {check_id!r} carry trace refs but no trace_bodies item",
            )


def _limits(
    facts: Facts, items: list[dict[str, Any]], limits: dict[Key, dict[str, Any]]
) -> Iterator[Finding]:
    """The case_limit item of each (kind, check) cut short, into `limits`."""
    seen: set[Key] = set()
    for item in items:
        key = (item["ref"]["kind"], item["ref"]["check_id"])
        if key[1] not in facts.check_line_numbers:
            yield failure(item["line"], "item", f"a case_limit item for a check with no line {key}")
        elif (repeated := _repeated(item, key, seen)) is not None:
            yield repeated
        else:
            limits[key] = item


def _evidence(facts: Facts, limited: set[Key]) -> Iterator[Finding]:
    body_checks = {c["check_id"]: c for c in facts.body.get("checks", [])}
    for check_id, (line_no, rebuilt) in facts.evidence.items():
        if ("case", check_id) in limited or check_id not in body_checks:
            continue
        refs = body_checks[check_id].get("evidence_refs", [])
        if body_checks[check_id].get("evidence_manifest"):
            yield compared(
                line_no,
                "evidence",
                f"check {check_id!r} evidence rebuilt from its cases vs the manifest",
                refs[0] if refs else None,
                rebuilt.digest(),
            )
        else:
            yield compared(
                line_no,
                "evidence",
                f"check {check_id!r} evidence rebuilt from its cases",
                refs,
                rebuilt.entries,
            )


def _replay(facts: Facts, last_line: int, limited: bool) -> Generator[Finding, None, str]:
    """Re-run the aggregation and return a one-line summary; an input it cannot aggregate is a
    named failure, and anything else it raises is a bug, which stays a crash with its trace."""
    # Imported here: the engine (numpy, scipy) loads only when a bundle is replayed.
    from app.aggregation.inputs import InvalidInput
    from app.bundles.replay import replay

    if limited:
        return "not run: cases were left out (case_limit)"
    try:
        return (yield from replay(facts, last_line))
    except InvalidInput as exc:
        yield failure(last_line, "replay", f"the aggregation could not be re-run: {exc}")
        return "failed: could not be re-run"
