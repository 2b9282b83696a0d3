"""--replay on a bundle whose suite, scorers, body or cases the engine cannot aggregate: a named
`replay` failure, never a crash. The verifier catches only the engine's InvalidInput, so any
other exception here would be a bug in the verifier or the engine, and fails the test."""

from __future__ import annotations

import gzip
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.bundles.results import NotABundle, Outcome
from app.bundles.verify import verify_file
from tests.bundles.edits import canonical, reseal
from tests.bundles.test_bundle_fuzz import RICH, mutate

Edit = Callable[[dict[str, Any]], None]
LINES = gzip.decompress(RICH.read_bytes()).splitlines()
REPLAY_MUTATIONS = 240


def _edited(tmp_path: Path, kind: str, change: Edit) -> Path:
    """The rich bundle with the first line of `kind` changed (digests left as they were), the
    trailer resealed."""
    lines = list(LINES)
    for index, line in enumerate(lines):
        value = orjson.loads(line)
        if value["kind"] == kind:
            change(value)
            lines[index] = canonical(value)
            break
    path = tmp_path / "edited.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in reseal(lines))))
    return path


def _replay_failures(outcome: Outcome) -> list[str]:
    return [f.what for f in outcome.failures if f.code == "replay"]


def _set(*path: Any, to: Any) -> Edit:
    def change(value: dict[str, Any]) -> None:
        for step in path[:-1]:
            value = value[step]
        value[path[-1]] = to

    return change


def _delete(*path: Any) -> Edit:
    def change(value: dict[str, Any]) -> None:
        for step in path[:-1]:
            value = value[step]
        del value[path[-1]]

    return change


FAULTS = [
    ("suite_version", _set("content", "checks", 0, "repeats", to="x"), "checks[0].repeats"),
    ("suite_version", _delete("content", "decision_rule"), "decision_rule"),
    (
        "suite_version",
        _set("content", "checks", 0, "aggregation", "method", to="median"),
        "checks[0].aggregation",
    ),
    ("suite_version", _set("content", "checks", 0, "min_coverage", to=2), "min_coverage"),
    ("suite_version", _delete("content", "checks"), "checks"),
    ("suite_version", _set("content", "decision_rule", "alpha", to=0), "alpha"),
    (
        "suite_version",
        _set("content", "checks", 0, "dataset", "digest", to="sha256:" + "0" * 64),
        f"names dataset sha256:{'0' * 64}, not in the bundle",
    ),
    ("scorer_version", _set("score_range", to=[1, 0]), "score_range is not [low, high]"),
    ("scorer_version", _set("score_range", to=[0]), "score_range"),
    ("scorer_version", _set("score_range", to="ab"), "score_range"),
    ("report", _delete("body", "evaluation_id"), "the body has no evaluation_id"),
    ("case", _set("repeat", to=7), "a case lies outside the check's examples or repeats"),
    ("case", _set("example_id", to="nowhere"), "example 'nowhere' is not in the dataset"),
]


@pytest.mark.parametrize(("kind", "change", "named"), FAULTS, ids=[f[2] for f in FAULTS])
def test_an_input_the_engine_cannot_aggregate_is_a_named_replay_failure(
    tmp_path: Path, kind: str, change: Edit, named: str
) -> None:
    outcome = verify_file(_edited(tmp_path, kind, change), replay=True)
    assert outcome.replay == "failed: could not be re-run"
    (what,) = _replay_failures(outcome)
    assert what.startswith("the aggregation could not be re-run: "), what
    assert named in what, what


def test_resealed_mutations_never_crash_the_replay(tmp_path: Path) -> None:
    """Random resealed edits of every line (the fuzz test's), verified with --replay: each ends
    in an outcome or "not a bundle", and the fast lanes agree with the careful path."""
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    for number in range(REPLAY_MUTATIONS):
        what, data, _ = mutate(rng, LINES)
        path = tmp_path / f"{number:04d}.jsonl.gz"
        path.write_bytes(data)
        results = []
        for careful in (False, True):
            try:
                outcome = verify_file(path, replay=True, careful=careful)
            except NotABundle as exc:
                results.append(str(exc))
                continue
            results.append((outcome.replay, [(f.line, f.code, f.what) for f in outcome.failures]))
        assert results[0] == results[1], f"seed {seed}: {what}"
