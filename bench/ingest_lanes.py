"""What each way of validating cases costs (app/ingestion), in process: no HTTP, no database.

`validate_batch` tries the lines lane (NDJSON bytes), then the column lane (parsed values), then
the careful path, case by case. The lanes stay only if they matter: this times the same cases
each way, in the service's batch sizes (512 NDJSON lines, 1,000 JSON body cases), and prints
cases per second, the peak of Python allocations (tracemalloc, one run apart from the timed
ones) and the ratio of each way's time to the careful path's (the baseline).

Cases: 20 checks x 1,000 examples x 5 repeats by default (`--examples`), pass/fail with a small
canonical output each, as `bench.ingest` sends them.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from app.digest.strictjson import parse_lines
from app.domain.suites import CompiledCheck, CompiledSuite
from app.ingestion import CaseValidator, ScorerInfo, validate_batch
from app.platform.config import Settings
from bench.common import load_note, table

CHECKS = 20
REPEATS = 5
LINE_BATCH = 512  # app/api/routers/body.py VALUE_BATCH_LINES
VALUE_BATCH = 1000  # app/services/evaluations.py JSON_BATCH
JUDGE = "sha256:" + "a" * 64


def lane_example_ids(examples: int) -> list[str]:
    """The ids of `examples` examples, as case_lines writes them (`ex-000000` on)."""
    return [f"ex-{i:06d}" for i in range(examples)]


def suite(example_ids: Sequence[str]) -> CompiledSuite:
    """A suite of CHECKS pass/fail checks over one dataset of these examples. Its ids are fixed,
    so that a counted run (bench/measures_lane.py) repeats its sets' and dicts' layouts."""
    positions = {example: i for i, example in enumerate(example_ids)}
    checks = {
        f"c{c:02d}": CompiledCheck(
            f"c{c:02d}", "pass_rate", REPEATS, "judge", "1", JUDGE, uuid.UUID(int=c), positions
        )
        for c in range(CHECKS)
    }
    return CompiledSuite(uuid.UUID(int=CHECKS), {}, checks)


def case_lines(examples: int) -> list[bytes]:
    """Every case as a compact, canonical NDJSON line."""
    return [
        orjson.dumps(
            {
                "check_id": f"c{c:02d}",
                "example_id": f"ex-{e:06d}",
                "repeat": r,
                "status": "pass" if (c + e + r) % 4 else "fail",
                "output": {"answer": f"answer {e % 97}"},
            },
            option=orjson.OPT_SORT_KEYS,
        )
        for c in range(CHECKS)
        for e in range(examples)
        for r in range(REPEATS)
    ]


def validator(compiled: CompiledSuite, *, ndjson: bool) -> CaseValidator:
    """A validator of the bench suite that may claim any assurance."""
    return CaseValidator(
        evaluation_id=uuid.uuid4(),
        suite=compiled,
        scorers={("judge", "1"): ScorerInfo(JUDGE, None, None)},
        assurance_cap="platform_verified",
        object_prefix="outputs/bench/bench",
        inline_limit=4096,
        ndjson=ndjson,
    )


def batches(items: list[Any], size: int) -> list[tuple[range, list[Any]]]:
    """`items` numbered from 1 and cut as the service cuts a request."""
    return [
        (range(start + 1, min(start + size, len(items)) + 1), items[start : start + size])
        for start in range(0, len(items), size)
    ]


def ways(
    compiled: CompiledSuite, lines: list[bytes], values: list[Any]
) -> dict[str, Callable[[], int]]:
    """Each way of validating the cases, as a call that returns how many rows it built."""
    line_batches = batches(lines, LINE_BATCH)
    value_batches = batches(values, VALUE_BATCH)

    def lines_lane() -> int:
        v = validator(compiled, ndjson=True)
        return sum(len(validate_batch(v, n, b).rows) for n, b in line_batches)

    def parsed_then_columns() -> int:
        v = validator(compiled, ndjson=True)
        v.lines_lane = False
        return sum(len(validate_batch(v, n, b).rows) for n, b in line_batches)

    def parsed_then_careful() -> int:
        v = validator(compiled, ndjson=True)
        return sum(len(v.careful_rows(n, parse_lines(n, b)).rows) for n, b in line_batches)

    def values_columns() -> int:
        v = validator(compiled, ndjson=False)
        return sum(len(validate_batch(v, n, b).rows) for n, b in value_batches)

    def values_careful() -> int:
        v = validator(compiled, ndjson=False)
        return sum(len(v.careful_rows(n, b).rows) for n, b in value_batches)

    return {
        "NDJSON: lines lane (validate_batch)": lines_lane,
        "NDJSON: parsed, column lane": parsed_then_columns,
        "NDJSON: parsed, careful path": parsed_then_careful,
        "JSON body: column lane (validate_batch)": values_columns,
        "JSON body: careful path": values_careful,
    }


def timed(calls: dict[str, Callable[[], int]], runs: int) -> dict[str, tuple[float, int]]:
    """Each call's median seconds over `runs` rounds (every call once a round, so that all meet
    the machine's changing states alike), and the rows it built."""
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    rows: dict[str, int] = {}
    for _ in range(runs):
        for name, call in calls.items():
            gc.collect()
            start = time.perf_counter()
            rows[name] = call()
            seconds[name].append(time.perf_counter() - start)
    return {name: (statistics.median(seconds[name]), rows[name]) for name in calls}


def peak_mb(call: Callable[[], int]) -> float:
    """Peak Python allocations of one call, in MB."""
    gc.collect()
    tracemalloc.start()
    call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1e6


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    compiled = suite(lane_example_ids(args.examples))
    lines = case_lines(args.examples)
    values = [orjson.loads(line) for line in lines]
    # As the service's lifespan sets it (app/api/main.py): what exists before the requests is frozen
    # out of the collector's walks, and young collections come less often.
    gc.freeze()
    gc.set_threshold(Settings().gc_gen0_threshold, 20, 50)
    calls = ways(compiled, lines, values)
    times = timed(calls, args.runs)
    found = {name: (times[name], peak_mb(call)) for name, call in calls.items()}
    baseline = {
        "NDJSON": found["NDJSON: parsed, careful path"][0][0],
        "JSON body": found["JSON body: careful path"][0][0],
    }
    rows = []
    for name, ((seconds, built), peak) in found.items():
        assert built == len(lines), f"{name} built {built} rows of {len(lines)}"
        base = baseline[name.split(":")[0]]
        rows.append(
            [
                name,
                f"{built:,}",
                f"{seconds:.2f}",
                f"{built / seconds:,.0f}",
                f"{peak:.0f}",
                f"{base / seconds:.2f}",
            ]
        )
    headers = ["way", "cases", "s (median)", "cases/s", "peak MB", "speed vs careful"]
    print(table(headers, rows))
    print(f"\n{args.runs} runs each; {load_note()}")


if __name__ == "__main__":
    main()
