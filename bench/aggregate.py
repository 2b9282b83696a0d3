"""Time the aggregation engine on 1,000,000 cases, and the per-check bootstrap against scipy.

20 checks x 10,000 examples x 5 repeats (half pass_rate, half mean, two slices each), once
under `threshold` and once under `non_inferiority` with Holm against a baseline of the same
shape. Targets: whole aggregation < 3 s, peak memory < 500 MB; per check >= 100x faster than
scipy's percentile bootstrap on pass/fail data and >= 5x on continuous scores.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
from typing import Any

import numpy as np
import psutil
from scipy import stats

from app.aggregation.engine import aggregate
from app.aggregation.inputs import AggregationInput, CaseColumns, DatasetIndex
from app.aggregation.power import plan
from app.aggregation.stats import _index_means, bootstrap
from app.digest import merkle
from bench.common import PeakRss, load_note, table

CHECKS, EXAMPLES, REPEATS = 20, 10_000, 5
DATASET_DIGEST = "sha256:" + "d" * 64
SCORER = {"name": "judge", "version": "1", "digest": "sha256:" + "e" * 64}


def suite(rule: str, checks_n: int = CHECKS, prefix: str | None = None) -> dict[str, Any]:
    checks = []
    for c in range(checks_n):
        method = "pass_rate" if c % 2 == 0 else "mean"
        checks.append(
            {
                "check_id": f"c{c:02d}",
                "required": True,
                "scorer": SCORER,
                "dataset": {"name": "big", "version": "1", "digest": DATASET_DIGEST},
                "repeats": REPEATS,
                "aggregation": {"method": method, "threshold": 0.6},
                "min_coverage": 1.0,
                "min_samples": 1,
                "slices": [
                    {"name": "a", "tag": "a", "required": True, "threshold": 0.6},
                    {"name": "b", "tag": "b", "required": False, "threshold": 0.6},
                ],
            }
        )
        if prefix is not None:
            checks[-1]["cluster_tag_prefix"] = prefix
            for item in checks[-1]["slices"]:
                item["cluster_tag_prefix"] = prefix
    family = []
    if rule == "non_inferiority":
        for check in checks:
            family += [check["check_id"], check["check_id"] + "/a"]
    return {
        "name": "big",
        "version": "1",
        "validity_hours": 24,
        "checks": checks,
        "decision_rule": {
            "rule": rule,
            "alpha": 0.05,
            "margin": 0.02,
            "correction": "holm" if rule == "non_inferiority" else "none",
            "family": family,
        },
    }


def columns(seed: int, check: int, pass_rate: float, examples: int = EXAMPLES) -> CaseColumns:
    rng = np.random.default_rng(seed * 1000 + check)
    n = examples * REPEATS
    digests = np.array(
        [
            f'"sha256:{hashlib.sha256(f"{seed}/{check}/{i}".encode()).hexdigest()}"'
            for i in range(n)
        ],
        dtype=object,
    )
    leaves = rng.bytes(32 * n)
    return CaseColumns(
        example_index=np.repeat(np.arange(examples, dtype=np.int32), REPEATS),
        repeat=np.tile(np.arange(REPEATS, dtype=np.int32), examples),
        status=(rng.random(n) >= pass_rate).astype(np.int8),
        score=rng.random(n) if check % 2 else np.full(n, np.nan),
        stale=np.zeros(n, np.bool_),
        assurance=np.full(n, 4, np.int8),
        has_output_digest=np.ones(n, np.bool_),
        evidence=digests,
        evidence_count=np.ones(n, np.int32),
        # The service hashes each check's cases tree while it reads the cases (setup here).
        leaves=leaves,
        root=merkle.root(merkle.split_leaves(leaves)),
    )


def inputs(rule: str) -> AggregationInput:
    ids = tuple(f"ex{i:05d}" for i in range(EXAMPLES))
    tags = tuple(
        tuple(t for t, every in (("a", 4), ("b", 7)) if i % every == 0) for i in range(EXAMPLES)
    )
    comparative = rule == "non_inferiority"
    return AggregationInput(
        evaluation_id="00000000-0000-4000-8000-00000000000a",
        suite=suite(rule),
        datasets={DATASET_DIGEST: DatasetIndex(ids, tags)},
        score_ranges={SCORER["digest"]: (0.0, 1.0)},
        cases={f"c{c:02d}": columns(1, c, 0.85) for c in range(CHECKS)},
        baseline_evaluation_id="00000000-0000-4000-8000-00000000000b" if comparative else None,
        baseline_cases={f"c{c:02d}": columns(2, c, 0.85) for c in range(CHECKS)}
        if comparative
        else None,
    )


def time_engine(rule: str) -> list[object]:
    inp = inputs(rule)
    process = psutil.Process()
    with PeakRss(process, interval=0.01) as rss:
        started = time.perf_counter()
        body = aggregate(inp).body
        seconds = time.perf_counter() - started
    cases = CHECKS * EXAMPLES * REPEATS * (2 if rule == "non_inferiority" else 1)
    return [
        rule + (" + holm" if rule == "non_inferiority" else ""),
        f"{cases:,}",
        f"{seconds:.2f}",
        f"{cases / seconds:,.0f}",
        f"{rss.growth_mb:.0f}",
        "< 3 s, < 500 MB",
        body["result"],
    ]


def clustered_inputs(clustered: bool) -> AggregationInput:
    """2 checks x 100,000 examples x 5 repeats (1M cases); examples in 10,000 clusters of 10."""
    checks, examples = 2, 100_000
    ids = tuple(f"ex{i:06d}" for i in range(examples))
    tags = tuple(
        (f"doc:{i // 10:05d}", *(t for t, every in (("a", 4), ("b", 7)) if i % every == 0))
        for i in range(examples)
    )
    return AggregationInput(
        evaluation_id="00000000-0000-4000-8000-00000000000c",
        suite=suite("threshold", checks, "doc:" if clustered else None),
        datasets={DATASET_DIGEST: DatasetIndex(ids, tags)},
        score_ranges={SCORER["digest"]: (0.0, 1.0)},
        cases={f"c{c:02d}": columns(3, c, 0.85, examples) for c in range(checks)},
    )


def time_clusters() -> list[list[object]]:
    """The same 1M cases without and with 10,000 clusters, back to back."""
    rows = []
    times = {}
    for clustered in (False, True):
        inp = clustered_inputs(clustered)
        aggregate(inp)  # warm the dataset's tag masks and cluster labels alike
        with PeakRss(psutil.Process(), interval=0.01) as rss:
            started = time.perf_counter()
            aggregate(inp)
            seconds = times[clustered] = time.perf_counter() - started
        rows.append(
            [
                "10,000 clusters" if clustered else "unclustered",
                "1,000,000",
                f"{seconds:.2f}",
                f"{rss.growth_mb:.0f}",
                f"{seconds / times[False]:.2f}",
                "<= 1.5x unclustered",
            ]
        )
    return rows


def time_editions(rounds: int = 5) -> list[list[object]]:
    """Issues 33 and 48: the same 1M-case aggregations under the first, second and third
    editions of the statistics rules, alternated, medians of `rounds` runs each."""
    cases = {
        "threshold, 20 checks": (inputs("threshold"), CHECKS * EXAMPLES * REPEATS),
        "non_inferiority + holm": (inputs("non_inferiority"), 2 * CHECKS * EXAMPLES * REPEATS),
        "10,000 clusters, 2 checks": (clustered_inputs(True), 1_000_000),
    }
    editions = (1, 2, 3)
    rows: list[list[object]] = []
    for name, (inp, count) in cases.items():
        times: dict[int, list[float]] = {e: [] for e in editions}
        for edition in editions:
            aggregate(dataclasses.replace(inp, edition=edition))  # warm masks and labels
        for _ in range(rounds):
            for edition in editions:
                started = time.perf_counter()
                aggregate(dataclasses.replace(inp, edition=edition))
                times[edition].append(time.perf_counter() - started)
        first, second, third = (float(np.median(times[e])) for e in editions)
        target = "<= 1.1x (CV3 + hull vs CR1)" if "clusters" in name else "<= 1.05x"
        rows.append(
            [
                name,
                f"{count:,}",
                f"{first:.2f}",
                f"{second:.2f}",
                f"{third:.2f}",
                f"{second / first:.2f}x",
                f"{third / second:.2f}x",
                target,
            ]
        )
    return rows


def time_planner() -> list[list[object]]:
    """The planner's function, per call."""
    rows = []
    for method, baseline, effect in (
        ("pass_rate", 0.7, 0.05),
        ("mean", 1.0, 0.2),
        ("paired", 1.0, 0.2),
    ):
        started = time.perf_counter()
        for _ in range(200):
            plan(method, baseline, effect, 0.05, 0.8)
        rows.append([method, f"{(time.perf_counter() - started) / 200 * 1000:.3f}", "< 5 ms"])
    return rows


def time_planner_http(requests: int = 300) -> list[list[object]]:
    """POST /evaluations/api/power against a served process: latency of one client."""
    import os
    import tempfile
    from pathlib import Path

    import httpx

    from app.platform.db import migrate
    from bench.common import database_url, served

    rows = []
    url = database_url()
    migrate(url)  # a fresh embedded server has no schema: the CLI's token needs it
    with served(url, Path(tempfile.mkdtemp(prefix="evalbook-bench-"))) as (base, _):
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        with httpx.Client(base_url=base, headers=headers) as http:
            for method, baseline, effect in (("pass_rate", 0.7, 0.05), ("paired", 1.0, 0.2)):
                body = {"method": method, "baseline": baseline, "effect": effect}
                latencies = []
                for _ in range(requests):
                    started = time.perf_counter()
                    answer = http.post("/evaluations/api/power", json=body)
                    latencies.append(time.perf_counter() - started)
                    assert answer.status_code == 200, answer.text
                p50, p99 = np.percentile(np.array(latencies) * 1000, [50, 99])
                rows.append([f"HTTP {method}", f"{p50:.2f} (p99 {p99:.2f})", "< 5 ms"])
    return rows


def time_bootstrap(kind: str, values: np.ndarray) -> list[object]:
    started = time.perf_counter()
    bootstrap(values, 0.05, 42)
    ours = time.perf_counter() - started
    started = time.perf_counter()
    stats.bootstrap((values,), np.mean, n_resamples=2000, method="percentile", random_state=1)
    theirs = time.perf_counter() - started
    target = ">= 100x" if kind == "pass/fail" else ">= 5x"
    return [
        kind,
        f"{values.size:,}",
        f"{ours * 1000:.1f}",
        f"{theirs * 1000:.1f}",
        f"{theirs / ours:.0f}x",
        target,
    ]


def time_same_family(kind: str, values: np.ndarray) -> list[object]:
    """Ours against the same algorithm family, both on one thread: on pass/fail data, counts
    resampled by numpy's multinomial (the method ours uses, without its checks); on continuous
    data, our index resampling on one stream and one thread against scipy's."""
    alpha, resamples = 0.05, 2000
    if kind == "pass/fail":
        started = time.perf_counter()
        bootstrap(values, alpha, 42)
        ours = time.perf_counter() - started
        started = time.perf_counter()
        levels, frequencies = np.unique(values, return_counts=True)
        rng = np.random.default_rng(1)
        means = rng.multinomial(values.size, frequencies / values.size, size=resamples) @ levels
        np.percentile(means / values.size, [2.5, 97.5])
        theirs = time.perf_counter() - started
        baseline = "numpy multinomial counts, 1 thread"
    else:
        started = time.perf_counter()
        means = _index_means(values, np.random.default_rng(42), resamples)
        np.percentile(means, [2.5, 97.5])
        ours = time.perf_counter() - started
        started = time.perf_counter()
        stats.bootstrap(
            (values,), np.mean, n_resamples=resamples, method="percentile", random_state=1
        )
        theirs = time.perf_counter() - started
        baseline = "scipy percentile (ours on 1 stream, 1 thread)"
    return [
        kind,
        baseline,
        f"{ours * 1000:.1f}",
        f"{theirs * 1000:.1f}",
        f"{theirs / ours:.1f}x",
    ]


def main() -> None:
    print(
        table(
            ["rule", "cases", "seconds", "cases/s", "peak RSS growth MB", "target", "result"],
            [time_engine("threshold"), time_engine("non_inferiority")],
        )
    )
    print()
    rng = np.random.default_rng(0)
    print(
        table(
            ["data", "values", "ours ms", "scipy percentile ms", "speed-up", "target"],
            [
                time_bootstrap("pass/fail", rng.binomial(1, 0.8, EXAMPLES).astype(float)),
                time_bootstrap("continuous", rng.random(EXAMPLES)),
            ],
        )
    )
    print()
    print(
        table(
            ["data", "baseline (same algorithm family)", "ours ms", "baseline ms", "speed-up"],
            [
                time_same_family("pass/fail", rng.binomial(1, 0.8, EXAMPLES).astype(float)),
                time_same_family("continuous", rng.random(EXAMPLES)),
            ],
        )
    )
    print(load_note())
    print()
    statistics_main()


def statistics_main() -> None:
    """Issue 16's figures: clusters against no clusters, and the planner."""
    print(
        table(
            ["aggregation (2 checks)", "cases", "seconds", "peak RSS growth MB", "ratio", "target"],
            time_clusters(),
        )
    )
    print()
    print(table(["planner method", "ms per call", "target"], time_planner() + time_planner_http()))
    print()
    editions_main()


def editions_main() -> None:
    """Issues 33 and 48: each edition against the one before, in one run."""
    print(
        table(
            [
                "aggregation",
                "cases",
                "edition 1 s",
                "edition 2 s",
                "edition 3 s",
                "2 / 1",
                "3 / 2",
                "target of 3 / 2",
            ],
            time_editions(),
        )
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--editions"]:
        editions_main()
        print(load_note())
    else:
        main()
