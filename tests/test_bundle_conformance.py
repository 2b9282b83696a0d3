"""The conformance set: both verifiers on every case of tests/bundles/, and on RFC 8785."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bundle_helpers import NODE_VERIFIER, REPO, node_verify, python_verify
from tests.bundles.generate import edit, kind, reseal

CASES = sorted(p.parent for p in (REPO / "tests" / "bundles").glob("*/expected.json"))
VECTORS = REPO / "tests" / "data" / "rfc8785"


def failures(outcome: dict[str, Any]) -> list[tuple[int, str]]:
    """(line, code) of each failure, in order."""
    return sorted((f["line"], f["code"]) for f in outcome.get("failures", []))


def test_the_set_has_passing_and_failing_cases() -> None:
    names = {case.name for case in CASES}
    assert {"rich_pass", "redacted_pass", "case_limit_pass", "multi_member_pass"} <= names
    assert len([n for n in names if n.endswith("_fail")]) >= 12
    for case in CASES:
        assert (case / "README.md").read_text().strip()
        assert case.name.endswith("_pass") == (
            json.loads((case / "expected.json").read_text())["exit"] == 0
        )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_both_verifiers_agree_with_the_expectation(case: Path) -> None:
    expected = json.loads((case / "expected.json").read_text())
    bundle = case / "bundle.jsonl.gz"
    python_code, python_outcome = python_verify(bundle)
    node_code, node_outcome = node_verify(bundle)
    assert python_code == node_code == expected["exit"], (python_outcome, node_outcome)
    if expected["exit"] == 2:
        return
    codes = {code for _, code in failures(python_outcome)}
    if expected["exact"]:
        assert codes == set(expected["codes"]), python_outcome["failures"]
    else:
        assert set(expected["codes"]) <= codes, python_outcome["failures"]
    assert failures(python_outcome) == failures(node_outcome)
    assert python_outcome["proven"] == node_outcome["proven"]
    assert python_outcome["not_proven"] == node_outcome["not_proven"]
    for failure in python_outcome["failures"]:
        assert failure["what"], failure


def test_failures_name_the_line_and_what(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            "node",
            str(NODE_VERIFIER),
            str(REPO / "tests/bundles/edited_envelope_fail/bundle.jsonl.gz"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "FAIL line 2: envelope: envelope.expires_at vs the body's valid_until" in done.stdout
    code, outcome = python_verify(REPO / "tests/bundles/edited_envelope_fail/bundle.jsonl.gz")
    assert code == 1
    assert outcome["failures"][0]["line"] == 2
    assert outcome["failures"][0]["expected"] != outcome["failures"][0]["actual"]


def test_replay_reproduces_the_report() -> None:
    code, outcome = python_verify(REPO / "tests/bundles/rich_pass/bundle.jsonl.gz", "--replay")
    assert code == 0, outcome
    assert outcome["replay"].startswith("matched")
    code, outcome = python_verify(
        REPO / "tests/bundles/case_limit_pass/bundle.jsonl.gz", "--replay"
    )
    assert code == 0
    assert outcome["replay"].startswith("not run")


def test_only_replay_catches_a_resealed_status_flip(tmp_path: Path) -> None:
    """A forger who flips a case and recomputes the trailer passes every digest (case statuses
    are not digested) but not a replay of the aggregation."""
    lines = gzip.decompress(
        (REPO / "tests/bundles/rich_pass/bundle.jsonl.gz").read_bytes()
    ).splitlines()
    forged = reseal(
        edit(
            lines,
            kind("case", check_id="accuracy", example_id="e00"),
            lambda v: v.update(status="pass"),
        )
    )
    path = tmp_path / "forged.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in forged)))
    assert python_verify(path)[0] == 0
    assert node_verify(path)[0] == 0
    code, outcome = python_verify(path, "--replay")
    assert code == 1
    assert {f["code"] for f in outcome["failures"]} == {"replay"}
    assert any("accuracy" in f["what"] or "checks[0]" in f["what"] for f in outcome["failures"])


def test_a_missing_or_foreign_file_is_not_a_bundle(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("not gzip at all\n")
    for path in (plain, tmp_path / "absent.gz"):
        assert python_verify(path)[0] == 2
        assert node_verify(path)[0] == 2


def node_canonical(values: list[Any]) -> list[str]:
    """Canonicalize values with the Node verifier's own canonicalizer."""
    script = (
        "import { canonicalize } from " + json.dumps(NODE_VERIFIER.as_uri()) + ";"
        "let input = '';"
        "process.stdin.on('data', (d) => (input += d));"
        "process.stdin.on('end', () => {"
        "  const values = JSON.parse(input);"
        "  process.stdout.write(JSON.stringify(values.map(canonicalize)));"
        "});"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        check=True,
    )
    result: list[str] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("name", sorted(p.name for p in (VECTORS / "input").glob("*.json")))
def test_node_canonicalizer_passes_the_rfc8785_vectors(name: str) -> None:
    value = json.loads((VECTORS / "input" / name).read_text(encoding="utf-8"))
    [canonical] = node_canonical([value])
    assert canonical.encode("utf-8") == (VECTORS / "output" / name).read_bytes()


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)))
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=6), inner, max_size=4
        )
    ),
    max_leaves=12,
)


@settings(max_examples=25, deadline=None)
@given(st.lists(json_values, min_size=20, max_size=20))
def test_node_canonicalizer_equals_rfc8785(values: list[Any]) -> None:
    assert [c.encode() for c in node_canonical(values)] == [rfc8785.dumps(v) for v in values]
