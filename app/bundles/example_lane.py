"""A run of example lines checked together: the Python verifier's lane for datasets.

As for case lines (app/bundles/case_lane.py): a run of lines that start as a canonical example
line does is parsed and checked at once (canonical form by one re-serialization, field types by
set operations, id order pairwise, bodies against their digests), and the dataset's streamed
digest takes the run's records in one update. A run with anything the careful path would fault
or that this lane does not judge goes through `Verifier.feed` line by line.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

import orjson

from app.bundles import lanes
from app.bundles.admission import Reading
from app.bundles.facts import Facts
from app.bundles.format import FIELD_TYPES, OPTIONAL, PHASES, REQUIRED
from app.bundles.rebuild import DatasetDigest
from app.bundles.results import Finding, Proven

EXAMPLE_START = b'{"body'
EXAMPLE_PHASE = PHASES["example"]
_KEYS = tuple(sorted(("kind", *REQUIRED["example"])))
_KEY_ORDERS = frozenset({_KEYS, *(tuple(sorted((*_KEYS, extra))) for extra in OPTIONAL["example"])})
_TYPES = FIELD_TYPES["example"]
# The columns a run is checked by (its dataset apart: the open dataset's digest for all).
_COLUMNS = ("id", "body_digest", "tags")
_KINDS = frozenset({"example"})


def accept(
    reading: Reading, facts: Facts, first_line: int, lines: list[bytes]
) -> list[Finding] | None:
    """Check a run of example lines numbered from `first_line`, add to the facts what the
    careful path would, and return the run's findings; None (and nothing added) when any line
    needs the careful path."""
    dataset = facts.dataset
    if dataset is None:
        return None
    opened = lanes.open_run(reading, first_line, lines, EXAMPLE_PHASE, _KEY_ORDERS, _KINDS)
    if opened is None:
        return None
    joined, values = opened
    datasets = [value["dataset"] for value in values]
    if not lanes.all_strings(datasets) or set(datasets) != {dataset.line.digest}:
        return None
    if not _columns_hold(values) or not _in_order(dataset, [value["id"] for value in values]):
        return None
    with_body = [index for index, value in enumerate(values) if "body" in value]
    if with_body and not _bodies_match(facts, lines, values, with_body):
        return None
    lanes.take(reading, joined, lines)
    _record(facts, dataset, first_line, values, with_body)
    return [Proven("body_digest", len(with_body))] if with_body else []


def _columns_hold(values: list[dict[str, Any]]) -> bool:
    """Whether each column of the run holds its type of the format's table."""
    return all(
        lanes.column_holds(_TYPES[name], [value[name] for value in values]) for name in _COLUMNS
    )


def _bodies_match(
    facts: Facts, lines: list[bytes], values: list[dict[str, Any]], with_body: list[int]
) -> bool:
    """Whether the bodies the run carries may be there and match their digests."""
    return facts.may_hold_bodies and lanes.members_match(
        lines, values, with_body, "body", "body_digest"
    )


def _in_order(dataset: DatasetDigest, ids: list[str]) -> bool:
    """Whether the run's ids follow the dataset's last id and each other, ascending."""
    if dataset.last_id is not None and not dataset.last_id < ids[0].encode():
        return False
    # Python orders strings by code point, as their UTF-8 bytes order.
    return all(map(operator.lt, ids, itertools.islice(ids, 1, None)))


def _record(
    facts: Facts,
    dataset: DatasetDigest,
    first_line: int,
    values: list[dict[str, Any]],
    with_body: list[int],
) -> None:
    """What the careful path adds to the facts for each of the run's lines."""
    # The records {"body_digest", "id", "tags"} of the run, comma-separated: the strings are
    # written by orjson as RFC 8785 writes them and the keys are sorted ASCII names.
    records = orjson.dumps(
        [{"body_digest": v["body_digest"], "id": v["id"], "tags": v["tags"]} for v in values],
        option=orjson.OPT_SORT_KEYS,
    )
    dataset.extend(records[1:-1], [v["id"] for v in values], [v["tags"] for v in values])
    dataset.last_id = values[-1]["id"].encode()
    if len(with_body) < len(values):
        digest = dataset.line.digest
        facts.absent_bodies.extend(
            (first_line + index, digest, value["id"])
            for index, value in enumerate(values)
            if "body" not in value
        )
