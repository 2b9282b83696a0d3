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
from typing import TYPE_CHECKING, Any

import orjson

from app.bundles import lanes

if TYPE_CHECKING:
    from app.bundles.verify import Verifier

EXAMPLE_START = b'{"body'
EXAMPLE_PHASE = 4
_KEYS = ("body_digest", "dataset", "id", "kind", "tags")
_KEY_ORDERS = frozenset({_KEYS, ("body", *_KEYS)})
_KINDS = frozenset({"example"})


def accept(verifier: Verifier, first_line: int, lines: list[bytes]) -> bool:
    """Check a run of example lines numbered from `first_line` and record them as `feed`
    would; False (and nothing recorded) when any line needs the careful path."""
    dataset = verifier.dataset
    if dataset is None:
        return False
    opened = lanes.open_run(verifier.reading, first_line, lines, EXAMPLE_PHASE, _KEY_ORDERS, _KINDS)
    if opened is None:
        return False
    joined, values = opened
    datasets = [value["dataset"] for value in values]
    if not lanes.all_strings(datasets) or set(datasets) != {dataset.line.digest}:
        return False
    ids = [value["id"] for value in values]
    body_digests = [value["body_digest"] for value in values]
    tags = [value["tags"] for value in values]
    if (
        set(map(type, ids)) != {str}
        or set(map(type, body_digests)) != {str}
        or set(map(type, tags)) != {list}
        or not set(map(type, itertools.chain.from_iterable(tags))) <= {str}
    ):
        return False
    if dataset.last_id is not None and not dataset.last_id < ids[0].encode():
        return False
    # Python orders strings by code point, as their UTF-8 bytes order.
    if not all(map(operator.lt, ids, itertools.islice(ids, 1, None))):
        return False
    with_body = [index for index, value in enumerate(values) if "body" in value]
    if with_body and not (
        verifier.may_hold_bodies
        and lanes.members_match(lines, values, with_body, "body", "body_digest")
    ):
        return False
    _record(verifier, first_line, lines, values, joined, with_body)
    return True


def _record(
    verifier: Verifier,
    first_line: int,
    lines: list[bytes],
    values: list[dict[str, Any]],
    joined: bytes,
    with_body: list[int],
) -> None:
    """What `Verifier.feed` records for each of the run's lines."""
    dataset = verifier.dataset
    assert dataset is not None
    lanes.take(verifier.reading, joined, lines)
    # The records {"body_digest", "id", "tags"} of the run, comma-separated: the strings are
    # written by orjson as RFC 8785 writes them and the keys are sorted ASCII names.
    records = orjson.dumps(
        [{"body_digest": v["body_digest"], "id": v["id"], "tags": v["tags"]} for v in values],
        option=orjson.OPT_SORT_KEYS,
    )
    dataset.extend(records[1:-1], [v["id"] for v in values], [v["tags"] for v in values])
    dataset.last_id = values[-1]["id"].encode()
    if with_body:
        verifier.outcome.proven["body_digest"] += len(with_body)
    if len(with_body) < len(values):
        digest = dataset.line.digest
        verifier.absent_bodies.extend(
            (first_line + index, digest, value["id"])
            for index, value in enumerate(values)
            if "body" not in value
        )
