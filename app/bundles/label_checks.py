"""What a bundle's label lines prove (docs/judges.md, section 4): each label belongs to a judged
check, lies in the sample its seed draws, counts (human_attested or above) and comes in
example order; at the end, the labels trees rebuilt from the lines against the roots the body
commits to."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import msgspec

from app.bundles.facts import Facts
from app.bundles.lines import LabelLine
from app.bundles.results import Failure, Finding, compared, failure
from app.digest import merkle
from app.domain.labels import COUNTING_ASSURANCE, LEAF_FIELDS, in_sample, label_leaf
from app.domain.vocabulary import ASSURANCE_RANK

MAX_NOTE = 2000


def _suite_check(facts: Facts, check_id: str) -> dict[str, Any]:
    """The suite's check of that id (empty when the suite has none)."""
    for check in facts.suite.get("checks") or []:
        if type(check) is dict and check.get("check_id") == check_id:
            return check
    return {}


def _calibration(check: dict[str, Any]) -> dict[str, Any] | None:
    """A suite check's frozen calibration, or None when it is not judged."""
    calibration = check.get("calibration")
    return calibration if type(calibration) is dict else None


def _method(check: dict[str, Any]) -> Any:
    """A suite check's aggregation method."""
    aggregation = check.get("aggregation")
    return aggregation.get("method") if type(aggregation) is dict else None


def _value_problem(method: Any, label: Any, note: Any) -> str | None:
    """What is wrong with a label's value (for its check's method) or its note, or None."""
    if method == "pass_rate" and label not in ("pass", "fail"):
        return "a pass_rate check's label is pass or fail"
    if method == "mean" and (
        type(label) not in (int, float) or isinstance(label, bool) or not math.isfinite(label)
    ):
        return "a mean check's label is a number"
    if note is not msgspec.UNSET and (type(note) is not str or len(note) > MAX_NOTE):
        return f"a label's note is text of at most {MAX_NOTE} characters"
    return None


def _placed(facts: Facts, line_no: int, line: LabelLine) -> Failure | None:
    """A label outside its check, or out of example order (a label after the baseline's)."""
    kind, check = line.kind, facts.check
    if check is None or line.check_id != check.check_id:
        return failure(line_no, "order", f"a {kind} of {line.check_id!r} outside its check")
    last = facts.last_label
    position = line.example_id.encode()
    if last is not None and last[0] == "baseline_label" and kind == "label":
        return failure(line_no, "order", "a label after the baseline's labels")
    if last is not None and last[0] == kind and position <= last[1]:
        code = "duplicate" if position == last[1] else "order"
        return failure(line_no, code, f"{kind} {line.example_id!r} is not in example order")
    return None


def on_label(facts: Facts, line_no: int, line: LabelLine) -> Iterator[Finding]:
    """A label of the report's evaluation or of the baseline's: on a judged check, in its
    sample, counting, in order; joined to its tree (and kept for --replay)."""
    misplaced = _placed(facts, line_no, line)
    if misplaced is not None:
        yield misplaced
        return
    kind, check_id, example_id = line.kind, line.check_id, line.example_id
    facts.last_label = (kind, example_id.encode())
    suite_check = _suite_check(facts, check_id)
    calibration = _calibration(suite_check)
    if calibration is None:
        yield failure(line_no, "label", f"a {kind} on {check_id!r}, which is not judged")
        return
    problem = _value_problem(_method(suite_check), line.label, line.note)
    if problem is not None:
        yield failure(line_no, "malformed", f"a {kind} line: {problem}")
        return
    if not in_sample(calibration, check_id, example_id):
        yield failure(
            line_no,
            "label_sample",
            f"{kind} {example_id!r} of {check_id!r} lies outside the check's label sample",
        )
        return
    if ASSURANCE_RANK[line.assurance] < ASSURANCE_RANK[COUNTING_ASSURANCE]:
        yield failure(
            line_no,
            "label_assurance",
            f"{kind} {example_id!r} of {check_id!r} is {line.assurance}, below "
            f"{COUNTING_ASSURANCE}: it cannot count",
        )
        return
    fields = {name: getattr(line, name) for name in LEAF_FIELDS}
    facts.label_leaves.setdefault((kind, check_id), []).append(label_leaf(fields))
    if facts.keep_cases:
        facts.labels[kind].setdefault(check_id, []).append(fields)


def settle_labels(facts: Facts) -> Iterator[Finding]:
    """Each judged check's labels (and its baseline's) against the roots its calibration
    commits to; labels on a check the body does not judge were refused line by line."""
    for check in facts.body.get("checks") or []:
        check_id = check.get("check_id") if type(check) is dict else None
        if check_id not in facts.check_line_numbers:
            continue
        line_no = facts.check_line_numbers[check_id]
        calibration = check.get("calibration")
        if calibration is None:
            continue
        if type(calibration) is not dict:
            yield failure(line_no, "labels_root", f"the calibration of {check_id!r} is malformed")
            continue
        for kind, key in (("label", "labels_root"), ("baseline_label", "baseline_labels_root")):
            committed = calibration.get(key)
            leaves = facts.label_leaves.get((kind, check_id), [])
            if committed is None and kind == "baseline_label" and not leaves:
                continue
            yield compared(
                line_no,
                "labels_root",
                f"{kind}s of {check_id!r}: the tree rebuilt from the lines vs the report's root",
                committed,
                merkle.hex_digest(merkle.root(leaves)),
            )
