"""CI's cheap guard on the hot paths (issue 56): each path timed against its floor in the same
process, the two alternated over rounds, as a ratio (floor time / path time; never an absolute
time), and compared with the ratio recorded in bench/guard_reference.json.

- ingestion: `validate_batch` on NDJSON lines (512 a batch) against parsing the same lines;
- export: bundle case lines written, their leaves and outputs hashed, gzip-compressed (ISA-L,
  the service's level) and hashed, against decompressing and hashing the same stored bytes
  (the floor `gzip -dc | sha256sum` in process);
- issuing: a report body's canonical bytes and digest against serialising it with orjson.

A ratio more than 10 % below its reference is flagged in the table (a restructuring that costs
that much shows in review); more than 30 % below fails the run (exit 1), a margin for a noisy
machine. `--update` records the ratios measured as the new reference. Takes about 20 s.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import statistics
import sys
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import orjson
from isal import isal_zlib

from app.bundles.format import case_line
from app.canonical import canonical_and_digest
from app.config import Settings
from app.ingestion import validate_batch
from app.services.integrity import leaves_and_outputs
from bench.common import load_note, table
from bench.ingest_lanes import LINE_BATCH, case_lines, suite, validator

REFERENCE = Path(__file__).with_name("guard_reference.json")
FLAG, FAIL = 0.90, 0.70


def ingestion_pair(
    examples: int = 400,
) -> tuple[Callable[[], object], Callable[[], object], int]:
    """(path, floor, 1): validating NDJSON batches; parsing the same lines."""
    compiled = suite(examples)
    lines = case_lines(examples)
    batches = [lines[i : i + LINE_BATCH] for i in range(0, len(lines), LINE_BATCH)]

    def path() -> object:
        check = validator(compiled, ndjson=True)
        return [validate_batch(check, range(len(b)), b) for b in batches]

    def floor() -> object:
        return [orjson.loads(line) for line in lines]

    return path, floor, 1


def export_pair(
    cases: int = 20_000,
) -> tuple[Callable[[], object], Callable[[], object], int]:
    """(path, floor, floor's reads a run): case lines written, hashed and compressed; the
    stored bytes read back."""
    scorer = "sha256:" + "a" * 64
    rows = []
    for i in range(cases):
        output = orjson.dumps({"text": f"answer {i} " + "x" * 200})
        rows.append(
            {
                "example_id": f"ex{i:06d}",
                "repeat": 0,
                "status": "pass" if i % 10 else "fail",
                "score": None,
                "output": output,
                "output_digest": "sha256:" + hashlib.sha256(output).hexdigest(),
                "output_key": None,
                "removed": False,
                "evidence_refs": [],
                "trace_id": None,
                "trace_digest": None,
                "scorer_version": "1",
                "assurance": "reported",
            }
        )
    level = Settings().bundle_gzip_level
    kind, check, scorer_json = b'"case"', b'"c00"', orjson.dumps(scorer)

    def path() -> bytes:
        lines = [case_line(kind, check, row, scorer_json, row["output"]) for row in rows]
        leaves, forged = leaves_and_outputs(rows, {"1": scorer})
        assert not forged and len(leaves) == 32 * cases
        data = b"\n".join(lines) + b"\n"
        compressor = isal_zlib.compressobj(level, isal_zlib.DEFLATED, 31)
        stored = compressor.compress(data) + compressor.flush()
        hashlib.sha256(data).digest()
        hashlib.sha256(stored).digest()
        return stored

    stored = path()

    # Five reads of the stored bytes a floor run, so both sides take a similar time; the
    # ratio is scaled back.
    def floor() -> object:
        return [hashlib.sha256(zlib.decompress(stored, 31)).digest() for _ in range(5)]

    return path, floor, 5


def issuing_pair() -> tuple[Callable[[], object], Callable[[], object], int]:
    """(path, floor, 1): canonical bytes and digest of a report-sized body; orjson of it."""
    body = {
        "report_id": str(uuid.UUID(int=1)),
        "checks": [
            {
                "check_id": f"c{c:02d}",
                "score": 0.1 + c / 100,
                "interval": {"lower": 0.05 + c / 200, "upper": 0.9, "method": "wilson"},
                "explanation": "passed: the lower bound is above the threshold " * 3,
                "slices": [{"name": f"s{s}", "score": s / 10, "n": 100 + s} for s in range(8)],
            }
            for c in range(20)
        ],
    }

    def path() -> object:
        return [canonical_and_digest(body) for _ in range(200)]

    def floor() -> object:
        return [hashlib.sha256(orjson.dumps(body)).digest() for _ in range(200)]

    return path, floor, 1


def timed(run: Callable[[], object], repeats: int = 3) -> float:
    """The best of `repeats` runs' seconds, each with the cyclic collector off (collected
    before), so one side's garbage is not collected in the other's time."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - started)
        finally:
            gc.enable()
    return best


def ratio(
    path: Callable[[], object], floor: Callable[[], object], per_run: int, rounds: int
) -> list[float]:
    """Floor time (of one of the floor's `per_run` repetitions) / path time in each round,
    the two alternated (the floor first every other)."""
    path(), floor()  # warm
    ratios = []
    for round_ in range(rounds):
        times = {}
        for name, run in (("path", path), ("floor", floor))[:: 1 if round_ % 2 else -1]:
            times[name] = timed(run)
        ratios.append(times["floor"] / per_run / times["path"])
    return ratios


PAIRS = {"ingestion": ingestion_pair, "export": export_pair, "issuing": issuing_pair}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--update", action="store_true", help="record these ratios")
    args = parser.parse_args()
    reference = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
    measured, rows, failed = {}, [], []
    for name, make in PAIRS.items():
        ratios = ratio(*make(), args.rounds)
        median = statistics.median(ratios)
        measured[name] = round(median, 3)
        recorded = reference.get(name)
        change = "" if recorded is None else f"{median / recorded - 1:+.0%}"
        verdict = "new"
        if recorded is not None:
            verdict = "ok" if median >= FLAG * recorded else "WORSE by over 10 %"
            if median < FAIL * recorded:
                verdict = "FAILED: over 30 % worse"
                failed.append(name)
        rows.append(
            [
                name,
                " ".join(f"{r:.3f}" for r in ratios),
                f"{median:.3f}",
                "-" if recorded is None else f"{recorded:.3f}",
                change,
                verdict,
            ]
        )
    print(table(["path / floor", "ratio per round", "median", "reference", "change", ""], rows))
    print(load_note())
    if args.update:
        REFERENCE.write_text(json.dumps(measured, indent=2) + "\n")
        print(f"recorded in {REFERENCE.name}")
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
