"""A judged check at a million examples (issue 51), in the engine: the finish's aggregation of
one pass_rate check over 1,000,000 examples with 10 % of them labelled (A: judged), against the
same check without calibration (B: the baseline); and the label sample's draw over the million
ids, cold (first use in a process) and cached. Alternated over `--rounds` rounds; medians.

Target (issue 51): the judged finish within 1.2 x the unjudged one, which bench/judges_http.py
measures over HTTP with the label read, with label ingest (target >= 50,000 labels/s) and the
requested-labels page (target < 100 ms); this one isolates the engine's share.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np
import psutil

from app.aggregation.engine import aggregate
from app.aggregation.inputs import (
    AggregationInput,
    CaseColumns,
    DatasetIndex,
    EvidenceList,
    LabelColumns,
)
from app.digest import merkle
from bench.common import PeakRss, load_note, table

EXAMPLES = 1_000_000
FRACTION = 0.1
DIGEST = "sha256:" + "d" * 64
SCORER = {"name": "judge", "version": "1", "digest": "sha256:" + "e" * 64}


def suite(judged: bool) -> dict[str, object]:
    """One pass_rate check over the million examples, judged or not."""
    check: dict[str, object] = {
        "check_id": "accuracy",
        "required": True,
        "scorer": SCORER,
        "dataset": {"name": "big", "version": "1", "digest": DIGEST},
        "repeats": 1,
        "aggregation": {"method": "pass_rate", "threshold": 0.7},
        "min_coverage": 1.0,
        "min_samples": 1,
        "slices": [],
    }
    if judged:
        check["calibration"] = {
            "method": "ppi",
            "label_fraction": FRACTION,
            "min_labels": 30,
            "sample_seed": "big",
        }
    return {
        "name": "bench",
        "decision_rule": {"rule": "interval", "alpha": 0.05, "margin": 0, "correction": "none"},
        "checks": [check],
    }


def inputs() -> tuple[AggregationInput, AggregationInput, DatasetIndex]:
    """The unjudged and judged inputs over one dataset index, and that index."""
    ids = tuple(f"ex-{i:07d}" for i in range(EXAMPLES))
    dataset = DatasetIndex(ids, tuple(() for _ in ids))
    rng = np.random.default_rng(51)
    truth = rng.random(EXAMPLES) < 0.7
    judge = truth | (rng.random(EXAMPLES) < 0.3)
    cases = CaseColumns(
        example_index=np.arange(EXAMPLES, dtype=np.int32),
        repeat=np.zeros(EXAMPLES, np.int32),
        status=np.where(judge, 0, 1).astype(np.int8),
        score=np.full(EXAMPLES, np.nan),
        stale=np.zeros(EXAMPLES, np.bool_),
        assurance=np.full(EXAMPLES, 4, np.int8),
        has_output_digest=np.zeros(EXAMPLES, np.bool_),
        evidence=np.empty(0, object),
        evidence_count=np.empty(0, np.int32),
        evidence_list=EvidenceList([], False),
        root=merkle.EMPTY_ROOT,
    )
    base = AggregationInput(
        evaluation_id="00000000-0000-4000-8000-000000000051",
        suite=suite(False),
        datasets={DIGEST: dataset},
        score_ranges={SCORER["digest"]: None},
        cases={"accuracy": cases},
    )
    sampled = np.flatnonzero(dataset.label_sample("big", "accuracy", FRACTION))
    labels = LabelColumns(
        sampled.astype(np.int32),
        truth[sampled].astype(np.float64),
        np.full(sampled.size, 3, np.int8),
        "sha256:" + "f" * 64,
    )
    judged = dataclasses.replace(base, suite=suite(True), labels={"accuracy": labels})
    return base, judged, dataset


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    started = time.perf_counter()
    base, judged, dataset = inputs()
    built = time.perf_counter() - started
    # The sample's draw: cold here (a fresh index), then cached on the index.
    fresh = DatasetIndex(dataset.ids, dataset.tags)
    cold_start = time.perf_counter()
    fresh.label_sample("big", "accuracy", FRACTION)
    cold = time.perf_counter() - cold_start
    warm_start = time.perf_counter()
    fresh.label_sample("big", "accuracy", FRACTION)
    warm = time.perf_counter() - warm_start
    times: dict[str, list[float]] = {"unjudged": [], "judged": []}
    with PeakRss(psutil.Process()) as peak:
        for _ in range(rounds):
            for name, inp in (("unjudged", base), ("judged", judged)):
                start = time.perf_counter()
                aggregate(inp)
                times[name].append(time.perf_counter() - start)
    plain = statistics.median(times["unjudged"])
    corrected = statistics.median(times["judged"])
    rows = [
        ["aggregate, unjudged (B)", f"{EXAMPLES:,}", f"{plain * 1000:.0f} ms", "1.00", "baseline"],
        [
            "aggregate, judged, 10 % labelled (A)",
            f"{EXAMPLES:,}",
            f"{corrected * 1000:.0f} ms",
            f"{corrected / plain:.2f}",
            "A / B <= 1.2",
        ],
        ["label sample draw, cold", f"{EXAMPLES:,}", f"{cold * 1000:.0f} ms", "", "once a process"],
        ["label sample draw, cached", f"{EXAMPLES:,}", f"{warm * 1000:.3f} ms", "", ""],
    ]
    print(table(["what", "examples", "median", "ratio to B", "target"], rows))
    print(f"rounds {rounds}; inputs built in {built:.1f} s; peak RSS {peak.peak / 1e6:.0f} MB")
    print("runs (s):", {k: [round(v, 3) for v in vs] for k, vs in times.items()})
    print(load_note())


if __name__ == "__main__":
    main()
