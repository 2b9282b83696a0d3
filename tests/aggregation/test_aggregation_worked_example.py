"""The worked example (tests/data/worked-example.json), end to end through the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.aggregation.engine import aggregate
from tests.aggregation_helpers import build_input, freeze

EXAMPLE = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "worked-example.json").read_text()
)


def test_worked_example() -> None:
    dataset = EXAMPLE["dataset"]
    content = freeze(EXAMPLE["suite_version"], dataset, EXAMPLE["scorers"])
    inp = build_input(
        content,
        dataset,
        EXAMPLE["scorers"],
        EXAMPLE["cases"],
        evaluation_id=EXAMPLE["evaluation_id"],
    )
    body = aggregate(inp).body
    expected = EXAMPLE["expected"]
    assert body["result"] == expected["result"]
    assert body["evidence_complete"] == expected["evidence_complete"]
    assert body["coverage"] == expected["coverage"]
    assert body["reasons"] == expected["reasons"]
    # Issued now, under the second edition of the statistics rules (docs/verdicts.md, section 10).
    assert body["decision_rule"] == {**expected["decision_rule"], "edition": 2}
    assert body["assurance"] == "platform_verified"
    for ours, theirs in zip(body["checks"], expected["checks"], strict=True):
        for key in ("check_id", "required", "status", "result", "coverage"):
            assert ours[key] == theirs[key], (ours["check_id"], key)
        assert ours["score"] == pytest.approx(theirs["score"], abs=1e-12)
        interval = theirs["interval"]
        if interval["method"] == "wilson":
            assert ours["interval"] == {
                **interval,
                "lower": pytest.approx(interval["lower"], abs=1e-12),
                "upper": pytest.approx(interval["upper"], abs=1e-12),
            }
        else:
            assert ours["interval"]["method"].startswith("bootstrap_percentile")
            assert ours["interval"]["seed"] == interval["seed"]
            assert ours["interval"]["resamples"] == 2000
            assert ours["interval"]["lower"] == pytest.approx(interval["lower_approx"], abs=0.02)
            assert ours["interval"]["upper"] == pytest.approx(interval["upper_approx"], abs=0.02)
        for our_slice, their_slice in zip(ours["slices"], theirs["slices"], strict=True):
            for key in ("name", "required", "status", "coverage"):
                assert our_slice[key] == their_slice[key]
            assert our_slice["score"] == pytest.approx(their_slice["score"])
            assert our_slice["interval"]["lower"] == pytest.approx(
                their_slice["interval"]["lower"], abs=1e-12
            )
    no_harm = body["checks"][1]
    assert "Already failed" in no_harm["explanation"]
    observations = body["checks"][2]["observations"]
    assert observations[0] == {"code": "unexecuted_timeout", "count": 2}
    # What the statistics additions say of it (repeats, MDE): codes only, the numbers are
    # checked against oracles in tests/aggregation/test_statistics.py.
    assert [o["code"] for o in observations[1:]] == [
        "flaky_examples",
        "pass_all_repeats",
        "pass_any_repeat",
        "mde",
    ]
    assert (
        body["checks"][0]["evidence_manifest"] is False
        and len(body["checks"][0]["evidence_refs"]) == 12
    )
