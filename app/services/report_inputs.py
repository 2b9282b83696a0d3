"""Turning stored cases into the aggregation engine's columns (finish and replay)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.aggregation.inputs import CaseColumns, DatasetIndex


def columns_by_check(
    rows: Sequence[Any],
    checks: Sequence[Mapping[str, Any]],
    datasets: Mapping[str, DatasetIndex],
    scorer_digests: Mapping[tuple[str, str], str],
) -> dict[str, CaseColumns]:
    """Split rows (ordered by check position, as `fetch_case_rows` returns them) per check."""
    if not rows:
        return {}
    (
        positions,
        example_ids,
        repeats,
        statuses,
        scores,
        versions,
        assurances,
        has_output,
        evidence,
        evidence_count,
    ) = zip(*rows, strict=True)
    position = np.asarray(positions, dtype=np.int32)
    bounds = np.searchsorted(position, np.arange(1, len(checks) + 2), side="left")
    score = np.array([np.nan if s is None else s for s in scores], dtype=np.float64)
    out: dict[str, CaseColumns] = {}
    for index, check in enumerate(checks):
        start, stop = int(bounds[index]), int(bounds[index + 1])
        if start == stop:
            continue
        dataset = datasets[check["dataset"]["digest"]]
        lookup = dataset.position
        name, pinned = check["scorer"]["name"], check["scorer"]["digest"]
        version_values, version_index = np.unique(
            np.asarray(versions[start:stop], dtype=object), return_inverse=True
        )
        stale_by_version = np.array(
            [scorer_digests.get((name, v)) != pinned for v in version_values], dtype=np.bool_
        )
        out[check["check_id"]] = CaseColumns(
            example_index=np.fromiter(
                (lookup(e) for e in example_ids[start:stop]), dtype=np.int32, count=stop - start
            ),
            repeat=np.asarray(repeats[start:stop], dtype=np.int32),
            status=np.asarray(statuses[start:stop], dtype=np.int8),
            score=score[start:stop],
            stale=stale_by_version[version_index],
            assurance=np.asarray(assurances[start:stop], dtype=np.int8),
            has_output_digest=np.asarray(has_output[start:stop], dtype=np.bool_),
            evidence=np.asarray(evidence[start:stop], dtype=object),
            evidence_count=np.asarray(evidence_count[start:stop], dtype=np.int32),
        )
    return out
