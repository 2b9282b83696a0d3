"""What the pages say in words: an example's own outcome from its repeats, and a report's
reasons as sentences that name the check as a name."""

from __future__ import annotations

import pytest

from app.domain.example_outcomes import example_outcome
from app.domain.reasons import reason_sentence


@pytest.mark.parametrize(
    ("statuses", "outcome", "words"),
    [
        ([], "missing", "no case"),
        (["pass"], "pass", "passed"),
        (["pass", "pass"], "pass", "passed every repeat"),
        (["fail", "fail"], "fail", "failed all 2 repeats"),
        (["pass", "fail", "fail"], "flaky", "passed 1 of 3 repeats and failed 2"),
        (["pass", "error"], "error", "not executed in 1 of 2 repeats"),
        (["timeout"], "error", "not executed in 1 of 1 repeat "),
    ],
)
def test_an_examples_own_outcome(statuses: list[str], outcome: str, words: str) -> None:
    found = example_outcome(statuses)
    assert found.outcome == outcome
    assert words in found.sentence()
    assert found.repeats == len(statuses)


def test_reasons_name_the_check_and_say_why() -> None:
    body = {"checks": [{"check_id": "includes", "explanation": "Failed: score 0.4 < 0.7."}]}
    failed = reason_sentence({"code": "check_fail", "check_id": "includes"}, body)
    assert failed == 'The required check "includes" failed: score 0.4 < 0.7.'
    errored = reason_sentence({"code": "check_error", "check_id": "x"})
    assert errored == 'The required check "x" ended in an error.'
    incomplete = reason_sentence(
        {"code": "evidence_incomplete", "check_id": "echo", "missing": 3, "undigested": 0}
    )
    assert '"echo" is incomplete: 3 expected example(s) were not executed.' in incomplete
    assert "passes only on complete evidence" in incomplete
