"""The cases trees rebuilt from a bundle's case lines, and what they prove (docs/bundles.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from app.bundles.results import Finding, NotProven, compared, failure
from app.bundles.shapes import is_digest, is_integer
from app.digest import merkle

if TYPE_CHECKING:
    from app.bundles.facts import Facts

PREDATES = "cases: the report predates case trees"


def leaf_of(value: dict[str, Any]) -> bytes:
    """The leaf hash of a (validated) case line."""
    return merkle.case_leaf(value, value["scorer_digest"])


def _settle_one(
    facts: Facts,
    kind: str,
    check_id: str,
    committed: Any,
    limit: dict[str, Any] | None,
) -> Iterator[Finding]:
    line_no = facts.check_line_numbers[check_id]
    leaves = facts.leaves.get((kind, check_id), [])
    m = len(leaves)
    what = f"{kind}s of {check_id!r}"
    if (
        type(committed) is not dict
        or not is_integer(committed.get("count"))
        or not is_digest(committed.get("root"))
    ):
        yield failure(line_no, "cases_root", f"the report's tree of the {what} is malformed")
        return
    n, root = int(committed["count"]), committed["root"]
    if limit is None:
        if m != n:
            yield failure(line_no, "cases_root", f"{what}: lines vs the report's count", n, m)
            return
        yield compared(
            line_no,
            "cases_root",
            f"{what}: the tree rebuilt from the lines vs the report's root",
            root,
            merkle.hex_digest(merkle.root(leaves)),
        )
        return
    if limit["count"] != n - m:
        yield failure(limit["line"], "item", f"{what}: the case_limit count", n - m, limit["count"])
        return
    if m == 0:
        # No line kept: nothing for a proof to bind, so the proof must be empty (junk is not
        # accepted as one).
        if limit.get("consistency_proof", []):
            yield failure(
                limit["line"], "item", f"{what}: a case_limit with no line kept carries a proof"
            )
        return
    proof = [merkle.from_hex_digest(p) for p in limit.get("consistency_proof", [])]
    implied = merkle.root_from_consistency(m, merkle.root(leaves), n, proof)
    yield compared(
        line_no,
        "cases_root",
        f"{what}: the {m} lines and the consistency proof vs the report's root",
        root,
        None if implied is None else merkle.hex_digest(implied),
    )


def _settle_measured(facts: Facts, check: dict[str, Any]) -> Iterator[Finding]:
    """A measure check's cases are those of the check it measures: its trees must be that
    check's (which its own case lines prove)."""
    check_id = check["check_id"]
    measure = check["measure"]
    of = measure.get("of") if type(measure) is dict else None
    source = next(
        (c for c in facts.body.get("checks") or [] if type(c) is dict and c.get("check_id") == of),
        None,
    )
    line_no = facts.check_line_numbers[check_id]
    if source is None or "measure" in source:
        yield failure(line_no, "cases_root", f"{check_id!r} measures no scored check of the body")
        return
    yield compared(
        line_no,
        "cases_root",
        f"{check_id!r} measures {of!r}: its cases tree vs that check's",
        source.get("cases"),
        check.get("cases"),
    )
    mine, theirs = check.get("comparison"), source.get("comparison")
    if type(mine) is dict:
        yield compared(
            line_no,
            "cases_root",
            f"{check_id!r} measures {of!r}: its baseline's cases tree vs that check's",
            theirs.get("baseline_cases") if type(theirs) is dict else None,
            mine.get("baseline_cases"),
        )


def settle_trees(facts: Facts, limits: dict[tuple[str, str], dict[str, Any]]) -> Iterator[Finding]:
    """Every check's cases (and its baseline's) against the roots the body commits to."""
    for check in facts.body.get("checks") or []:
        check_id = check.get("check_id") if type(check) is dict else None
        if check_id not in facts.check_line_numbers:
            continue
        if "measure" in check:
            yield from _settle_measured(facts, check)
            continue
        if "cases" not in check:
            count = len(facts.leaves.get(("case", check_id), []))
            count += len(facts.leaves.get(("baseline_case", check_id), []))
            if count:
                yield NotProven(PREDATES, count)
            continue
        yield from _settle_one(
            facts, "case", check_id, check["cases"], limits.get(("case", check_id))
        )
        comparison = check.get("comparison")
        committed = comparison.get("baseline_cases") if type(comparison) is dict else None
        if committed is None:
            if facts.leaves.get(("baseline_case", check_id)):
                yield failure(
                    facts.check_line_numbers[check_id],
                    "baseline",
                    f"baseline cases of {check_id!r}, which the report compares with none",
                )
            continue
        yield from _settle_one(
            facts, "baseline_case", check_id, committed, limits.get(("baseline_case", check_id))
        )
