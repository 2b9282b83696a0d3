"""What a dataset version's lines prove: the version opens a run of example lines, each
example is in id order with its body's digest, and the run's end settles the version's count
and digest against its line and the report body's dataset_refs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from msgspec import UNSET

from app.bundles.admission import Reading
from app.bundles.facts import Facts
from app.bundles.lines import DatasetVersionLine, ExampleLine
from app.bundles.rebuild import DatasetDigest
from app.bundles.results import Finding, compared, failure


def on_dataset_version(facts: Facts, line_no: int, line: DatasetVersionLine) -> Iterator[Finding]:
    """A dataset version: opens its run of example lines."""
    yield from close_dataset(facts)
    if line.digest in facts.datasets:
        yield failure(line_no, "duplicate", f"a second line for dataset {line.digest}")
        return
    facts.dataset = DatasetDigest(line_no, line)
    facts.datasets[line.digest] = facts.dataset


def close_dataset(facts: Facts) -> Iterator[Finding]:
    """Settle the dataset version whose example lines just ended."""
    dataset, facts.dataset = facts.dataset, None
    if dataset is not None:
        yield from _dataset_findings(dataset, facts.body)


def _dataset_findings(dataset: DatasetDigest, body: dict[str, Any]) -> Iterator[Finding]:
    """A dataset version's example count and digest from its example lines, and its digest
    among the body's dataset_refs."""
    line, line_no = dataset.line, dataset.line_no
    yield compared(
        line_no,
        "dataset_count",
        f"dataset {line.name} {line.version} example count",
        line.example_count,
        dataset.count,
    )
    computed = dataset.digest()
    yield compared(
        line_no,
        "dataset_digest",
        f"dataset {line.name} {line.version} from its example lines",
        line.digest,
        computed,
    )
    ref = {r["digest"]: r for r in body.get("dataset_refs", [])}.get(computed)
    yield compared(
        line_no,
        "dataset_digest",
        f"dataset {line.name} {line.version} vs the body's dataset_refs",
        True,
        ref is not None and (ref["name"], ref["version"]) == (line.name, line.version),
    )


def on_example(
    facts: Facts, reading: Reading, line_no: int, line: ExampleLine
) -> Iterator[Finding]:
    """An example: inside its dataset version, in id order, its body's digest."""
    dataset = facts.dataset
    if dataset is None or line.dataset != dataset.line.digest:
        yield failure(line_no, "order", "an example outside its dataset version")
        return
    example_id = line.id
    key = example_id.encode()
    if dataset.last_id is not None and key <= dataset.last_id:
        yield failure(line_no, "order", f"example {example_id!r} is not in id order")
    dataset.last_id = key
    dataset.add(example_id, line.body_digest, line.tags)
    if line.body is not UNSET:
        yield from carried_body(
            facts,
            reading,
            line_no,
            "body",
            f"example {example_id!r} body",
            line.body_digest,
            line.body,
        )
    else:
        facts.absent_bodies.append((line_no, line.dataset, example_id))


# What a body carried in a line's member is, as a failure names it.
_CARRIED = {"body": "an example body", "output": "a case output"}


def carried_body(
    facts: Facts, reading: Reading, line_no: int, member: str, what: str, digest: Any, value: Any
) -> Iterator[Finding]:
    """The checks of a body a line carries in `member` ("body" of an example, "output" of a
    case; `what` names it): the exporter may read bodies, and `digest` is the body's."""
    if not facts.may_hold_bodies:
        yield failure(
            line_no,
            "body_without_permission",
            f"{_CARRIED[member]} for an exporter without dataset.read_body",
        )
    key, follower = f'"{member}":'.encode(), f',"{member}_digest":'.encode()
    yield compared(
        line_no, f"{member}_digest", what, digest, reading.member_digest(key, follower, value)
    )
