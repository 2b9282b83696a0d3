"""What the engine reads: columnar cases, dataset indexes, and the codes they use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.digest.manifest_digests import digests_of
from app.digest.merkle import EMPTY_ROOT, case_leaf, hex_digest
from app.domain.labels import sample_heads
from app.domain.vocabulary import (
    ASSURANCE_LEVELS,
    CASE_STATUSES,
    FAIL,
    PASS,
    REASON_RANK,
    REASONS,
    SCORED_RANK,
    STATUS_CODE,
)

__all__ = [
    "ASSURANCE_LEVELS",
    "CASE_STATUSES",
    "FAIL",
    "PASS",
    "REASONS",
    "REASON_RANK",
    "SCORED_RANK",
    "STATUS_CODE",
]

ASSURANCE_CODE = {level: code for code, level in enumerate(ASSURANCE_LEVELS)}


# The largest repeat a case column holds (int32); a suite allows at most 1,000 repeats.
REPEAT_LIMIT = int(np.iinfo(np.int32).max)


class InvalidInput(ValueError):
    """An input the engine cannot aggregate: a suite content of the wrong shape, a dataset the
    suite names but the input lacks, a case off its check's grid. The engine raises it for
    input faults only, so that a caller aggregating what came from outside (a bundle's
    --replay) tells them from a bug, which stays a crash with its trace."""


# Rank of the reason a non-scored case gives, by status code (pass and fail are scored).
_STATUS_REASON_RANK = np.array(
    [SCORED_RANK, SCORED_RANK] + [REASON_RANK[s] for s in CASE_STATUSES[2:]], dtype=np.int8
)


@dataclass(frozen=True)
class EvidenceList:
    """A check's evidence list as the body gives it: its refs (the entries, or the manifest's
    digest) and, when it is a manifest, the manifest as its canonical JSON `document` or
    already in its stored form (`digests`, 32 bytes an entry)."""

    refs: list[str]
    is_manifest: bool
    document: bytes | None = None
    digests: bytes | None = None

    def stored(self) -> bytes:
        """The manifest's entries as stored: each digest's 32 bytes, in order."""
        if self.digests is not None:
            return self.digests
        assert self.document is not None, "an evidence list that is no manifest"
        return digests_of(self.document)


@dataclass(frozen=True)
class CaseColumns:
    """One check's cases as aligned arrays (one entry per case, any order).

    `evidence` holds, per case, its evidence list entries already written as JSON strings
    joined by commas (output digest, trace digest, evidence refs; "" when none), and
    `evidence_count` how many entries that is. A reader that can order the cases itself may
    instead give the whole list already joined in case order (`evidence_document`, with
    `evidence_total` entries) and leave `evidence` and `evidence_count` empty, or settle the
    list itself (`evidence_list`, from `app.aggregation.manifest.evidence_list_of`) and keep
    no document at all: a manifest's JSON is 74 bytes a case, its stored form 32.

    `leaves` is every case's RFC 6962 leaf hash (app.digest.merkle), concatenated in case order
    (example id in byte order, then repeat): the check's cases tree is built from them. A
    reader that hashed the tree already gives its `root` and may leave `leaves` empty.
    """

    example_index: NDArray[np.int32]
    repeat: NDArray[np.int32]
    status: NDArray[np.int8]
    score: NDArray[np.float64]
    stale: NDArray[np.bool_]
    assurance: NDArray[np.int8]
    has_output_digest: NDArray[np.bool_]
    evidence: NDArray[np.object_]
    evidence_count: NDArray[np.int32]
    # Joined entries (str), or the whole canonical array already with its brackets (bytes).
    evidence_document: str | bytes | None = None
    evidence_total: int = 0
    evidence_list: EvidenceList | None = None
    leaves: bytes = b""
    # The root of the tree over `leaves`, when the reader hashed it already.
    root: bytes | None = None
    # Per measure name, each case's value (NaN where a case carries none); only the measures
    # some measure check reads need be given.
    measures: Mapping[str, NDArray[np.float64]] = field(default_factory=dict)
    # A measure check's view of its cases: which scored cases lack the measure (unexecuted for
    # it, reason measure_missing).
    missing_measure: NDArray[np.bool_] | None = None

    @property
    def size(self) -> int:
        """Number of cases."""
        return int(self.status.size)

    def reason_rank(self) -> NDArray[np.int8]:
        """Per case: SCORED_RANK when scored, else the rank of its reason (stale first)."""
        ranks = _STATUS_REASON_RANK[self.status]
        if self.missing_measure is not None:
            ranks = np.where(self.missing_measure, np.int8(REASON_RANK["measure_missing"]), ranks)
        return np.where(self.stale, np.int8(REASON_RANK["stale"]), ranks).astype(np.int8)

    def measured(self, name: str) -> CaseColumns:
        """These cases as a measure check reads them: each scored case's value is its measure
        `name`; a scored case without it is unexecuted for the measure (measure_missing)."""
        values = self.measures.get(name)
        if values is None:
            values = np.full(self.size, np.nan)
        scored = (self.status == PASS) | (self.status == FAIL)
        return replace(
            self,
            score=values,
            missing_measure=scored & np.isnan(values),
            measures={},
        )

    @staticmethod
    def empty() -> CaseColumns:
        """A check with no case."""
        return CaseColumns(
            np.empty(0, np.int32),
            np.empty(0, np.int32),
            np.empty(0, np.int8),
            np.empty(0, np.float64),
            np.empty(0, np.bool_),
            np.empty(0, np.int8),
            np.empty(0, np.bool_),
            np.empty(0, object),
            np.empty(0, np.int32),
        )


@dataclass(frozen=True)
class LabelColumns:
    """One judged check's counting labels as aligned arrays (docs/judges.md): each label's
    example position, its value (pass 1, fail 0, or the number) and assurance code; and the
    root of the check's labels tree, which the reader hashed from the labels' leaves."""

    example_index: NDArray[np.int32]
    value: NDArray[np.float64]
    assurance: NDArray[np.int8]
    root: str = hex_digest(EMPTY_ROOT)

    @property
    def size(self) -> int:
        """Number of labels."""
        return int(self.value.size)

    @staticmethod
    def empty() -> LabelColumns:
        """A judged check without a label."""
        return LabelColumns(np.empty(0, np.int32), np.empty(0, np.float64), np.empty(0, np.int8))


@dataclass(frozen=True)
class DatasetIndex:
    """A dataset version's example ids in byte order, with their tags."""

    ids: tuple[str, ...]
    tags: tuple[tuple[str, ...], ...]
    _positions: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _masks: dict[str, NDArray[np.bool_]] = field(default_factory=dict, compare=False, repr=False)
    _clusters: dict[str, NDArray[np.int64]] = field(default_factory=dict, compare=False, repr=False)
    _samples: dict[tuple[str, str, float], NDArray[np.bool_]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if list(self.ids) != sorted(self.ids):
            raise InvalidInput("example ids must be in byte order")
        self._positions.update({example_id: i for i, example_id in enumerate(self.ids)})

    @property
    def size(self) -> int:
        """Number of examples."""
        return len(self.ids)

    @property
    def positions(self) -> Mapping[str, int]:
        """Example id to index."""
        return self._positions

    def position(self, example_id: str) -> int:
        """Index of an example id (InvalidInput for an id the dataset does not hold)."""
        found = self._positions.get(example_id)
        if found is None:
            raise InvalidInput(f"example {example_id!r} is not in the dataset")
        return found

    def tag_mask(self, tag: str) -> NDArray[np.bool_]:
        """Which examples carry `tag` (computed once per tag)."""
        mask = self._masks.get(tag)
        if mask is None:
            mask = np.fromiter((tag in tags for tags in self.tags), dtype=np.bool_, count=self.size)
            mask.setflags(write=False)
            self._masks[tag] = mask
        return mask

    def label_sample(self, sample_seed: str, check_id: str, fraction: float) -> NDArray[np.bool_]:
        """Which examples a judged check's label sample holds (docs/judges.md, section 2):
        those whose draw, the first 8 bytes of their sample hash over 2**64, is below
        `fraction` (computed once per seed, check and fraction)."""
        key = (sample_seed, check_id, fraction)
        found = self._samples.get(key)
        if found is None:
            heads = sample_heads(sample_seed, check_id, self.ids)
            # uint64 to float64 rounds once, and 2**64 is a power of two: the same double as
            # Python's int / 2**64.
            draws = np.frombuffer(heads, dtype=">u8").astype(np.float64) / 2.0**64
            found = draws < fraction
            found.setflags(write=False)
            self._samples[key] = found
        return found

    def cluster_labels(self, prefix: str) -> NDArray[np.int64]:
        """Each example's cluster under `prefix`: its one tag starting with it, or a cluster of
        its own (labels are integers; only equality matters). Two such tags: ValueError."""
        labels = self._clusters.get(prefix)
        if labels is None:
            names: dict[str, int] = {}
            values = np.empty(self.size, dtype=np.int64)
            for i, tags in enumerate(self.tags):
                found = [t for t in tags if t.startswith(prefix)]
                if len(found) > 1:
                    raise InvalidInput(
                        f"example {self.ids[i]} has two tags starting with {prefix!r}"
                    )
                # Tagged clusters count from 0; an untagged example gets -1 - its index.
                values[i] = names.setdefault(found[0], len(names)) if found else -1 - i
            values.setflags(write=False)
            labels = self._clusters[prefix] = values
        return labels


@dataclass(frozen=True)
class AggregationInput:
    """Everything a report's aggregation depends on (docs/verdicts.md: a pure function of it)."""

    evaluation_id: str
    suite: Mapping[str, Any]
    datasets: Mapping[str, DatasetIndex]
    score_ranges: Mapping[str, tuple[float, float] | None]
    cases: Mapping[str, CaseColumns]
    baseline_evaluation_id: str | None = None
    baseline_cases: Mapping[str, CaseColumns] | None = None
    # Per judged check, its counting labels (a judged check absent here has none).
    labels: Mapping[str, LabelColumns] = field(default_factory=dict)
    baseline_labels: Mapping[str, LabelColumns] | None = None
    # The digest of the baseline evaluation's report, when it has one.
    baseline_report_digest: str | None = None
    # The statistics rules (app.aggregation.rounding): the third edition for every new report;
    # the first and second only to replay a report issued under them.
    edition: int = 3
    # A gate report's place among the gate reports of its subject digest under its suite (1 for
    # the first); None for other modes. Used when the suite spends alpha over re-evaluations.
    look: int | None = None


def evidence_fragment(record: Mapping[str, Any]) -> tuple[str, int]:
    """A case's evidence list entries as a JSON fragment, and how many there are."""
    entries: list[str] = []
    if record.get("output_digest"):
        entries.append(record["output_digest"])
    trace = record.get("trace_ref")
    if trace:
        entries.append(trace["digest"])
    entries.extend(record.get("evidence_refs") or [])
    return ",".join(f'"{entry}"' for entry in entries), len(entries)


def _version(record: Mapping[str, Any], pinned_version: str) -> str:
    """The scorer version a case names (the pinned one when it names none)."""
    version: str = record.get("scorer_version") or pinned_version
    return version


def _measure_columns(rows: list[Mapping[str, Any]]) -> dict[str, NDArray[np.float64]]:
    """Per measure name any case carries, each case's value (NaN where it has none)."""
    names = sorted({name for r in rows for name in (r.get("measures") or {})})
    return {
        name: np.array(
            [(r.get("measures") or {}).get(name, np.nan) for r in rows], dtype=np.float64
        )
        for name in names
    }


def _score(record: Mapping[str, Any]) -> float:
    """A case's score as a float, NaN when it has none."""
    score = record.get("score")
    return np.nan if score is None else float(score)


def _leaves(
    rows: list[Mapping[str, Any]], scorer_digests: Mapping[str, str], pinned_version: str
) -> bytes:
    """The check's case leaves in tree order (example id bytes, then repeat)."""
    in_order = sorted(rows, key=lambda r: (r["example_id"].encode(), r["repeat"]))
    return b"".join(
        case_leaf(r, r.get("scorer_digest") or scorer_digests.get(_version(r, pinned_version), ""))
        for r in in_order
    )


def columns_from_records(
    records: Iterable[Mapping[str, Any]],
    dataset: DatasetIndex,
    pinned_version: str,
    scorer_digests: Mapping[str, str],
    pinned_digest: str,
) -> CaseColumns:
    """Build one check's columns from case dicts (API, bundle or test form).

    A case names its scorer version (default: the pinned one); it is stale when that
    version's digest differs from the pinned digest. `output_digest` must already be set for
    cases whose output was sent.
    """
    rows = list(records)
    if any(r["repeat"] > REPEAT_LIMIT for r in rows):
        raise InvalidInput(f"a repeat above {REPEAT_LIMIT}")
    fragments = [evidence_fragment(r) for r in rows]
    leaves = _leaves(rows, scorer_digests, pinned_version)
    return CaseColumns(
        example_index=np.array([dataset.position(r["example_id"]) for r in rows], np.int32),
        repeat=np.array([r["repeat"] for r in rows], np.int32),
        status=np.array([STATUS_CODE[r["status"]] for r in rows], np.int8),
        score=np.array([_score(r) for r in rows], np.float64),
        stale=np.array(
            [scorer_digests.get(_version(r, pinned_version)) != pinned_digest for r in rows],
            np.bool_,
        ),
        assurance=np.array([ASSURANCE_CODE[r["assurance"]] for r in rows], np.int8),
        has_output_digest=np.array([bool(r.get("output_digest")) for r in rows], np.bool_),
        evidence=np.array([f for f, _ in fragments] or [], dtype=object),
        evidence_count=np.array([n for _, n in fragments], np.int32),
        leaves=leaves,
        measures=_measure_columns(rows),
    )
