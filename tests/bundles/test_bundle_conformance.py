"""The conformance set: both verifiers on every case of tests/bundles/, and on RFC 8785."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from app.bundles.results import NotABundle
from app.bundles.verify import verify_file
from tests.bundle_helpers import (
    NODE_TIMEOUT,
    NODE_VERIFIER,
    REPO,
    node_map,
    node_verify,
    node_verify_many,
    python_verify,
)
from tests.bundles.edits import edit, kind, reseal

CASES = sorted(p.parent for p in (REPO / "tests" / "bundles").glob("*/expected.json"))
VECTORS = REPO / "tests" / "data" / "rfc8785"


def failures(outcome: dict[str, Any]) -> list[tuple[int, str]]:
    """(line, code) of each failure, in order."""
    return sorted((f["line"], f["code"]) for f in outcome.get("failures", []))


def test_the_set_has_passing_and_failing_cases() -> None:
    names = {case.name for case in CASES}
    assert {"rich_pass", "redacted_pass", "case_limit_pass", "multi_member_pass"} <= names
    assert len([n for n in names if n.endswith("_fail")]) >= 80
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


RUNS = [case for case in CASES if "runs" in json.loads((case / "expected.json").read_text())]


@pytest.mark.parametrize("case", RUNS, ids=[c.name for c in RUNS])
def test_both_verifiers_agree_on_every_option_run(case: Path) -> None:
    """The forger classes: with and without --key, --keys and --require-trust, both verifiers
    give the expected exit and failure codes, the same failures and the same counts."""
    from tests.bundles.forger_classes import arguments

    bundle = case / "bundle.jsonl.gz"
    for run in json.loads((case / "expected.json").read_text())["runs"]:
        args = arguments(run["args"])
        python_code, python_outcome = python_verify(bundle, *args)
        node_code, node_outcome = node_verify(bundle, *args)
        context = (case.name, run["option"], python_outcome["failures"])
        assert python_code == node_code == run["exit"], context
        assert sorted({code for _, code in failures(python_outcome)}) == run["codes"], context
        assert failures(python_outcome) == failures(node_outcome), context
        assert python_outcome["proven"] == node_outcome["proven"], context
        assert python_outcome["not_proven"] == node_outcome["not_proven"], context


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
        timeout=NODE_TIMEOUT,
    )
    assert done.returncode == 1
    assert "FAIL line 2: envelope: envelope.expires_at vs the body's valid_until" in done.stdout
    code, outcome = python_verify(REPO / "tests/bundles/edited_envelope_fail/bundle.jsonl.gz")
    assert code == 1
    assert outcome["failures"][0]["line"] == 2
    assert outcome["failures"][0]["expected"] != outcome["failures"][0]["actual"]


@pytest.mark.parametrize("bundle", ["rich_pass", "edited_envelope_fail"])
def test_node_cli_runs_itself_again_with_compiles_on_the_main_thread(
    tmp_path: Path, bundle: str
) -> None:
    """`node verify-bundle.mjs` without the flag that keeps Node's exit from deadlocking runs
    itself once more with it (options and arguments kept; the child's exit status is the
    command's), and the shebang's command line runs at once. A preloaded script tells each
    process's options."""
    preload = tmp_path / "options.cjs"
    preload.write_text(
        "process.stderr.write('options ' + JSON.stringify(process.execArgv) + '\\n');"
    )
    path = str(REPO / "tests" / "bundles" / bundle / "bundle.jsonl.gz")
    shebang = NODE_VERIFIER.read_text().splitlines()[0].split()[2:]
    runs = {}
    for name, command in {
        "plain": ["node", "--require", str(preload), str(NODE_VERIFIER), path, "--json"],
        "shebang": [*shebang, "--require", str(preload), str(NODE_VERIFIER), path, "--json"],
    }.items():
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=NODE_TIMEOUT
        )
        options = [
            json.loads(line.removeprefix("options "))
            for line in done.stderr.splitlines()
            if line.startswith("options ")
        ]
        runs[name] = (done.returncode, json.loads(done.stdout), options)
    flag = "--no-concurrent-recompilation"
    preloaded = ["--require", str(preload)]
    assert shebang == ["node", flag]
    assert runs["plain"][2] == [preloaded, [flag, *preloaded]]
    assert runs["shebang"][2] == [[flag, *preloaded]]
    assert runs["plain"][:2] == runs["shebang"][:2]
    assert runs["plain"][0] == (0 if bundle == "rich_pass" else 1)
    assert runs["plain"][:2] == node_verify(Path(path))


def test_replay_reproduces_the_report() -> None:
    code, outcome = python_verify(REPO / "tests/bundles/rich_pass/bundle.jsonl.gz", "--replay")
    assert code == 0, outcome
    assert outcome["replay"].startswith("matched")
    code, outcome = python_verify(
        REPO / "tests/bundles/case_limit_pass/bundle.jsonl.gz", "--replay"
    )
    assert code == 0
    assert outcome["replay"].startswith("not run")


def test_a_resealed_status_flip_fails_without_replay(tmp_path: Path) -> None:
    """A forger who flips a case and recomputes the trailer passes every digest of the old
    format; the case's leaf is in the check's cases tree, whose root the signed body holds."""
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
    for verify in (python_verify, node_verify):
        code, outcome = verify(path)
        assert code == 1
        assert {f["code"] for f in outcome["failures"]} == {"cases_root"}
    code, outcome = python_verify(path, "--replay")
    assert code == 1 and {f["code"] for f in outcome["failures"]} == {"cases_root", "replay"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_replay_never_crashes(case: Path) -> None:
    """Whatever a bundle holds, --replay ends in a verdict: exit 0, 1 or 2, never a traceback."""
    try:
        outcome = verify_file(case / "bundle.jsonl.gz", replay=True)
    except NotABundle:
        assert json.loads((case / "expected.json").read_text())["exit"] == 2
        return
    expected = json.loads((case / "expected.json").read_text())["exit"]
    if case.name.startswith("forger_"):
        # Every forger edited the result: the replay of its cases says otherwise.
        assert any(f.code == "replay" for f in outcome.failures), outcome.failures
        return
    assert outcome.ok == (expected == 0), [str(f) for f in outcome.failures]


KEYS = REPO / "tests" / "bundles" / "keys.json"


def test_what_was_proven_and_by_whom() -> None:
    """Both verifiers name the report, its digest and the signer, and whether they trust it."""
    bundle = REPO / "tests/bundles/rich_pass/bundle.jsonl.gz"
    keys = json.loads(KEYS.read_text())["keys"]
    raw = base64.b64decode(keys[0]["public_key"])
    pem = (
        Ed25519PublicKey.from_public_bytes(raw)
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    header = json.loads(gzip.decompress(bundle.read_bytes()).splitlines()[0])
    for verify in (python_verify, node_verify):
        code, untrusted = verify(bundle)
        assert code == 0
        assert untrusted["signer"] == {"keyid": keys[0]["keyid"], "trusted": False}
        assert untrusted["report_id"] == header["report_id"]
        assert untrusted["report_digest"] == header["report_digest"]
        assert (untrusted["unavailable"], untrusted["redacted"]) == (6, 6)
        for extra in (("--keys", str(KEYS)), ("--key", keys[0]["public_key"]), ("--key", pem)):
            code, trusted = verify(bundle, *extra, "--require-trust")
            assert code == 0, trusted
            assert trusted["signer"] == {"keyid": keys[0]["keyid"], "trusted": True}
        code, refused = verify(bundle, "--require-trust")
        assert code == 1 and [f["code"] for f in refused["failures"]] == ["untrusted"]
        other = base64.b64encode(
            Ed25519PrivateKey.generate()
            .public_key()
            .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        ).decode()
        code, elsewhere = verify(bundle, "--key", other, "--require-trust")
        assert code == 1 and elsewhere["signer"]["trusted"] is False
        code, _ = verify(bundle, "--key", "not a key")
        assert code == 64  # a bad key is a wrong command line (app/domain/exits.py)


def test_a_missing_or_foreign_file_is_not_a_bundle(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("not gzip at all\n")
    for path, code in ((plain, 2), (tmp_path / "absent.gz", 66)):
        assert python_verify(path)[0] == code
        assert node_verify(path)[0] == code


def node_canonical(values: list[Any]) -> list[str]:
    """Canonicalize values with the Node verifier's own canonicalizer."""
    return node_map("canonicalize", values)


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


def test_the_node_verifier_reads_the_same_in_blocks_of_any_size() -> None:
    """The Node verifier reads the compressed file a block at a time and hands each to zlib as
    it takes the last. Read in blocks of 7 and 4,096 bytes (cut inside gzip headers,
    between members and inside lines), every conformance bundle gets the same exit, failures
    and proofs as in one block."""
    paths = [case / "bundle.jsonl.gz" for case in CASES]

    def outcomes(read_block: int | None) -> list[Any]:
        # The line count of a damaged stream is how far it was read before the damage showed.
        return [
            (r["exit"], *(r.get("document", {}).get(k) for k in ("failures", "proven", "ok")))
            for r in node_verify_many(paths, read_block=read_block)
        ]

    whole = outcomes(None)
    assert len(whole) == len(CASES)
    for block in (7, 4096):
        assert outcomes(block) == whole, block


@pytest.mark.parametrize("tail", [b"\x00\x00\x00", b"garbage"], ids=["zeros", "text"])
def test_a_damaged_stream_reports_the_same_document_in_both(tmp_path: Path, tail: bytes) -> None:
    """Bytes after the last member: one failure, and no lines counted, in both verifiers (how
    many lines were read before the damage showed depends on each reader's block size)."""
    bundle = tmp_path / "tail.jsonl.gz"
    bundle.write_bytes(
        (REPO / "tests" / "bundles" / "rich_pass" / "bundle.jsonl.gz").read_bytes() + tail
    )
    python_code, python_outcome = python_verify(bundle)
    node_code, node_outcome = node_verify(bundle)
    assert python_code == node_code == 1
    # The whole document alike, but for what each says of --replay (Node has none).
    python_outcome.pop("replay")
    node_outcome.pop("replay")
    assert python_outcome == node_outcome, (python_outcome, node_outcome)
    assert python_outcome["lines"] == 0 and failures(python_outcome) == [(0, "trailing_bytes")]
