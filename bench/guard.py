"""CI's cheap guard on the hot paths (issue 56): each path timed against its floor in the same
process, the two alternated, as a ratio (floor time / path time; never an absolute time), and
that ratio compared with the same ratio of a reference commit measured on the same machine in
the same run (the two trees in turn, over rounds).

- ingestion: `validate_batch` on NDJSON lines (512 a batch) against parsing the same lines;
- export: bundle case lines written, their leaves and outputs hashed, gzip-compressed (ISA-L,
  the service's level) and hashed, against decompressing and hashing the same stored bytes
  (the floor `gzip -dc | sha256sum` in process);
- issuing: a report body's canonical bytes and digest against serialising it with orjson.

Why against a commit and not a recorded ratio: a ratio of interpreted work to native work moves
with the machine (a machine whose Python ran four times slower put all three 31-43 % below the
ratios recorded on another, with no change in the code). The reference commit, recorded in
bench/guard_reference.json, is unpacked from git into a scratch folder and measured by its own
bench/guard.py in a separate process, alternated with this tree's.

A path more than 10 % below the reference is flagged in the table (a restructuring that costs
that much shows in review); more than 30 % below fails the run (exit 1). `--update` records
HEAD as the new reference. Takes about 40 s.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import orjson
from isal import isal_zlib

from app.bundles.writing import case_line
from app.digest.canonical import canonical_and_digest
from app.ingestion import validate_batch
from app.platform.config import Settings
from app.services.case_integrity import leaves_and_outputs
from bench.common import REPO, load_note, table
from bench.ingest_lanes import LINE_BATCH, case_lines, lane_example_ids, suite, validator

REFERENCE = Path(__file__).with_name("guard_reference.json")
FLAG, FAIL = 0.90, 0.70


def ingestion_pair(
    examples: int = 400,
) -> tuple[Callable[[], object], Callable[[], object], int]:
    """(path, floor, 1): validating NDJSON batches; parsing the same lines."""
    compiled = suite(lane_example_ids(examples))
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


def tree_ratios(rounds: int) -> dict[str, float]:
    """This tree's median ratio of each path to its floor over `rounds` alternated rounds."""
    return {
        name: round(statistics.median(ratio(*make(), rounds)), 4) for name, make in PAIRS.items()
    }


def reference_tree(commit: str, into: Path) -> Path:
    """The reference commit's `app` and `bench` unpacked into `into` (from git, so the guard
    needs the clone's history, which CI's clean clone has)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "app", "bench"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def has_commit(commit: str) -> bool:
    """True when the clone holds `commit`."""
    probe = ["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def side_ratios(tree: Path) -> dict[str, float]:
    """One process's ratios for the tree at `tree` (its own `app` and `bench` come first on
    the path, since the process starts there)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.guard", "--ratios"],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"the guard could not measure {tree}:\n{done.stderr[-3000:]}")
    ratios: dict[str, float] = json.loads(done.stdout)
    return ratios


def verdict(change: float) -> str:
    """What a change of this tree's ratio against the reference's says."""
    if change < FAIL:
        return "FAILED: over 30 % worse"
    return "ok" if change >= FLAG else "WORSE by over 10 %"


def compared(rounds: int, reference: Path) -> tuple[str, bool]:
    """This tree (A) and the reference tree (B) measured in turn, B first in every other
    round: the table, and whether a path failed."""
    sides: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    trees = {"A": REPO, "B": reference}
    for round_ in range(rounds):
        for side in ("A", "B")[:: 1 if round_ % 2 else -1]:
            sides[side].append(side_ratios(trees[side]))
    rows, failed = [], False
    for name in sides["A"][0]:
        mine = statistics.median(r[name] for r in sides["A"])
        if name not in sides["B"][0]:
            rows.append([name, f"{mine:.3f}", "-", "-", "new: not compared"])
            continue
        theirs = statistics.median(r[name] for r in sides["B"])
        change = mine / theirs
        failed |= change < FAIL
        rows.append([name, f"{mine:.3f}", f"{theirs:.3f}", f"{change - 1:+.0%}", verdict(change)])
    headers = ["path / floor", "A: this tree", "B: reference", "A / B - 1", ""]
    return table(headers, rows), failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of A and B")
    parser.add_argument("--ratios", action="store_true", help="print this tree's ratios (JSON)")
    parser.add_argument("--update", action="store_true", help="record HEAD as the reference")
    args = parser.parse_args()
    if args.ratios:
        print(json.dumps(tree_ratios(3)))
        return 0
    if args.update:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        REFERENCE.write_text(json.dumps({"commit": head}, indent=2) + "\n")
        print(f"recorded {head} in {REFERENCE.name}")
        return 0
    commit = json.loads(REFERENCE.read_text())["commit"]
    if not has_commit(commit):
        # A shallow clone lacks the reference: say so and show this tree's ratios unjudged.
        print(
            f"the reference {commit[:12]} is not in this clone; this tree's ratios, not compared:"
        )
        print(table(["path / floor", "A: this tree"], [[k, v] for k, v in tree_ratios(3).items()]))
        print(load_note())
        return 0
    with tempfile.TemporaryDirectory(prefix="evalbook-guard-") as scratch:
        report, failed = compared(args.rounds, reference_tree(commit, Path(scratch)))
    print(f"A: this tree; B: {commit[:12]} (bench/{REFERENCE.name}); ratio = floor / path")
    print(report)
    print(load_note())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
