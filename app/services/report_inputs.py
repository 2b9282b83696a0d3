"""Turning stored cases into the aggregation engine's columns (finish)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app import merkle
from app.aggregation.inputs import CaseColumns, DatasetIndex

_NO_EVIDENCE = np.empty(0, dtype=object)
_NO_COUNTS = np.empty(0, dtype=np.int32)


def leaves_in_case_order(leaves: bytes, example_index: np.ndarray, repeat: np.ndarray) -> bytes:
    """The leaf hashes, read in scan order, put in case order (example position in the
    dataset, which is example id byte order, then repeat); a sort here is cheaper than an
    ordered aggregate in SQL."""
    if not leaves:
        return b""
    order = np.lexsort((repeat, example_index))
    return np.frombuffer(leaves, dtype="V32")[order].tobytes()


def columns_by_check(
    rows: Sequence[Any],
    checks: Sequence[Mapping[str, Any]],
    datasets: Mapping[str, DatasetIndex],
    scorer_digests: Mapping[tuple[str, str], str],
) -> dict[str, CaseColumns]:
    """One CaseColumns per check from `fetch_case_rows` (one row of arrays per check), with
    each check's cases tree root already hashed (this runs in a thread while other checks
    are still being read)."""
    out: dict[str, CaseColumns] = {}
    for row in rows:
        check = checks[row["check_position"] - 1]
        dataset = datasets[check["dataset"]["digest"]]
        name, pinned = check["scorer"]["name"], check["scorer"]["digest"]
        versions = row["scorer_versions"]
        stale_of = {v: scorer_digests.get((name, v)) != pinned for v in set(versions)}
        if len(stale_of) == 1:
            stale = np.full(len(versions), next(iter(stale_of.values())), dtype=np.bool_)
        else:
            stale = np.fromiter(map(stale_of.__getitem__, versions), np.bool_, len(versions))
        example_ids = row["example_ids"]
        example_index = np.fromiter(
            map(dataset.positions.__getitem__, example_ids), dtype=np.int32, count=len(example_ids)
        )
        repeat = np.asarray(row["repeats"], dtype=np.int32)
        leaves = leaves_in_case_order(row["leaves"] or b"", example_index, repeat)
        out[check["check_id"]] = CaseColumns(
            example_index=example_index,
            repeat=repeat,
            status=np.asarray(row["status_codes"], dtype=np.int8),
            score=np.asarray(row["scores"], dtype=np.float64),
            stale=stale,
            assurance=np.asarray(row["assurance_codes"], dtype=np.int8),
            has_output_digest=np.asarray(row["has_output_digest"], dtype=np.bool_),
            evidence=_NO_EVIDENCE,
            evidence_count=_NO_COUNTS,
            evidence_document=row["evidence_document"] or "",
            evidence_total=row["evidence_total"] or 0,
            leaves=leaves,
            root=merkle.root(merkle.split_leaves(leaves)),
        )
    return out
