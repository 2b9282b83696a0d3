"""The RFC 6962 tree against the transparency-dev test vectors and the RFC's own recursion."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.digest import merkle

VECTORS = Path(__file__).resolve().parents[1] / "data" / "merkle"


def _b64(value: str | None) -> bytes:
    return base64.b64decode(value or "")


def _files(kind: str) -> list[Path]:
    return sorted((VECTORS / kind).rglob("*.json"))


def _leaf_hashes(count: int) -> list[bytes]:
    leaves = json.loads((VECTORS / "leaves.json").read_text())["leaves"]
    return [merkle.leaf_hash(bytes.fromhex(x)) for x in leaves[:count]]


# The RFC's definitions, written as recursion: the oracle for the level-based tree.
def _mth(hashes: list[bytes]) -> bytes:
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = 1
    while k * 2 < len(hashes):
        k *= 2
    return merkle.node_hash(_mth(hashes[:k]), _mth(hashes[k:]))


def _path(m: int, hashes: list[bytes]) -> list[bytes]:
    if len(hashes) <= 1:
        return []
    k = 1
    while k * 2 < len(hashes):
        k *= 2
    if m < k:
        return [*_path(m, hashes[:k]), _mth(hashes[k:])]
    return [*_path(m - k, hashes[k:]), _mth(hashes[:k])]


def _subproof(m: int, hashes: list[bytes], complete: bool) -> list[bytes]:
    n = len(hashes)
    if m == n:
        return [] if complete else [_mth(hashes)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return [*_subproof(m, hashes[:k], complete), _mth(hashes[k:])]
    return [*_subproof(m - k, hashes[k:], False), _mth(hashes[:k])]


def test_roots_of_every_prefix_match_the_published_roots() -> None:
    roots = json.loads((VECTORS / "leaves.json").read_text())["roots"]
    for size, expected in enumerate(roots):
        assert merkle.root(_leaf_hashes(size)).hex() == expected
        # The same tree from the leaves joined in one buffer, as finishing hashes it.
        assert merkle.root_of_joined(b"".join(_leaf_hashes(size))).hex() == expected


@pytest.mark.parametrize("path", _files("inclusion"), ids=lambda p: str(p.relative_to(VECTORS)))
def test_inclusion_vectors(path: Path) -> None:
    case = json.loads(path.read_text())
    ok = merkle.verify_inclusion(
        _b64(case["leafHash"]),
        case["leafIdx"],
        case["treeSize"],
        [_b64(p) for p in case["proof"] or []],
        _b64(case["root"]),
    )
    assert ok is not case["wantErr"], case["desc"]
    if not case["wantErr"] and case["treeSize"] <= 8 and "additional" not in str(path):
        tree = merkle.levels(_leaf_hashes(case["treeSize"]))
        assert merkle.audit_path(tree, case["leafIdx"]) == [_b64(p) for p in case["proof"] or []]


@pytest.mark.parametrize("path", _files("consistency"), ids=lambda p: str(p.relative_to(VECTORS)))
def test_consistency_vectors(path: Path) -> None:
    case = json.loads(path.read_text())
    proof = [_b64(p) for p in case["proof"] or []]
    implied = merkle.root_from_consistency(case["size1"], _b64(case["root1"]), case["size2"], proof)
    ok = implied is not None and implied == _b64(case["root2"])
    assert ok is not case["wantErr"], case["desc"]
    if not case["wantErr"] and case["size2"] <= 8 and "additional" not in str(path):
        tree = merkle.levels(_leaf_hashes(case["size2"]))
        assert merkle.consistency_proof(tree, case["size1"]) == proof


def _random_hashes(count: int, seed: int) -> list[bytes]:
    return [hashlib.sha256(f"{seed}:{i}".encode()).digest() for i in range(count)]


@settings(max_examples=150, deadline=None)
@given(size=st.integers(1, 300), seed=st.integers(0, 10**6), data=st.data())
def test_audit_paths_for_random_sizes(size: int, seed: int, data: st.DataObject) -> None:
    hashes = _random_hashes(size, seed)
    tree = merkle.levels(hashes)
    top = merkle.root(hashes)
    assert top == _mth(hashes) == tree[-1][0]
    index = data.draw(st.integers(0, size - 1))
    path = merkle.audit_path(tree, index)
    assert path == _path(index, hashes)
    assert merkle.verify_inclusion(hashes[index], index, size, path, top)
    wrong = data.draw(st.integers(0, size - 1))
    if hashes[wrong] != hashes[index]:
        assert not merkle.verify_inclusion(hashes[wrong], index, size, path, top)
    if path:
        bent = list(path)
        bent[data.draw(st.integers(0, len(path) - 1))] = bytes(32)
        assert not merkle.verify_inclusion(hashes[index], index, size, bent, top)


@settings(max_examples=150, deadline=None)
@given(size=st.integers(1, 300), seed=st.integers(0, 10**6), data=st.data())
def test_consistency_proofs_for_random_sizes(size: int, seed: int, data: st.DataObject) -> None:
    hashes = _random_hashes(size, seed)
    tree = merkle.levels(hashes)
    m = data.draw(st.integers(1, size))
    proof = merkle.consistency_proof(tree, m)
    assert proof == _subproof(m, hashes, True) if m < size else proof == []
    prefix_root = merkle.root(hashes[:m])
    assert merkle.root_from_consistency(m, prefix_root, size, proof) == tree[-1][0]
    if m < size:
        # A changed prefix does not imply the full root.
        changed = merkle.root([bytes(32), *hashes[1:m]])
        assert merkle.root_from_consistency(m, changed, size, proof) != tree[-1][0]


def test_case_record_is_rfc8785() -> None:
    import rfc8785

    fields = {
        "example_id": 'ex-ü\u0001"',
        "repeat": 3,
        "status": "pass",
        "score": 1e-7,
        "output_digest": "sha256:" + "a" * 64,
        "trace_digest": None,
        "evidence_refs": ["sha256:" + "b" * 64],
        "assurance": "reported",
        "scorer_digest": "sha256:" + "c" * 64,
    }
    for score in (1e-7, 0.5, 1.0, 123456789012345680000.0, None, -0.0, 1e21):
        fields["score"] = score
        assert merkle.case_record(**fields) == rfc8785.dumps(fields)


def test_the_leaf_input_template_writes_case_records() -> None:
    """LEAF_INPUT, filled with each field's JSON text, is 0x00 and case_record's very bytes."""
    refs = ["sha256:" + "a" * 64, "sha256:" + "b" * 64]
    for example_id, score, digest, trace, evidence in (
        ("e01", None, None, None, []),
        ('q"é\\1', 0.25, "sha256:" + "c" * 64, "sha256:" + "d" * 64, refs),
        ("x", 3.0, None, None, refs[:1]),
    ):
        record = merkle.case_record(
            example_id, 2, "pass", score, digest, trace, evidence, "reported", "sha256:" + "e" * 64
        )
        filled = merkle.LEAF_INPUT % (
            "reported",
            json.dumps(evidence, separators=(",", ":")),
            json.dumps(example_id, ensure_ascii=False),
            json.dumps(digest),
            2,
            "null" if score is None else merkle.es_number(score),
            "sha256:" + "e" * 64,
            "pass",
            json.dumps(trace),
        )
        assert filled.encode() == b"\x00" + record
    assert merkle.plain("e01 é") and not merkle.plain('q"') and not merkle.plain("a\\b")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["reported", "platform_verified"]),
            st.sampled_from(["[]", '["sha256:' + "a" * 64 + '"]']),
            st.text(max_size=6).map(lambda e: json.dumps(e, ensure_ascii=False)),
            st.sampled_from(["null", '"sha256:' + "c" * 64 + '"']),
            st.integers(0, 3).map(str),
            st.sampled_from(["null", "0.5", "1"]),
            st.just("sha256:" + "e" * 64),
            st.sampled_from(["pass", "fail"]),
            st.sampled_from(["null", '"sha256:' + "d" * 64 + '"']),
        ),
        max_size=12,
    )
)
def test_leaf_hashes_joined_from_columns_are_the_templates(cases: list[tuple[str, ...]]) -> None:
    """Constant columns folded into the literal text or not, each leaf is the hash of
    LEAF_INPUT filled with that case's fields."""
    columns = [list(column) for column in zip(*cases, strict=True)] or [[] for _ in range(9)]
    expected = [
        hashlib.sha256((merkle.LEAF_INPUT.replace("%d", "%s") % case).encode()).digest()
        for case in cases
    ]
    assert merkle.joined_leaf_hashes(merkle.LEAF_PARTS, columns) == expected


_CASE_FIELDS = st.tuples(
    st.text(min_size=1, max_size=12),
    st.integers(min_value=0, max_value=99),
    st.sampled_from(["pass", "fail", "error", "skipped"]),
    st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
    st.one_of(st.none(), st.just("sha256:" + "ab" * 32)),
    st.one_of(st.none(), st.just("sha256:" + "cd" * 32)),
    st.one_of(st.none(), st.lists(st.text(max_size=8), max_size=3)),
    st.sampled_from(["reported", "platform_verified"]),
    st.sampled_from(["", "sha256:" + "ef" * 32]),
)


@given(st.lists(_CASE_FIELDS, min_size=1, max_size=30))
def test_leaf_hashes_from_columns_are_those_of_each_case_record(
    cases: list[tuple[Any, ...]],
) -> None:
    columns = [list(column) for column in zip(*cases, strict=True)]
    expected = [hashlib.sha256(b"\x00" + merkle.case_record(*case)).digest() for case in cases]
    assert merkle.column_leaf_hashes(*columns) == expected
