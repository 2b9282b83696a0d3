"""The transparency log's pure parts: tile paths, entry bundles, the compact range, proofs
from tiles against the whole-tree RFC 6962 functions, signed notes and cosignatures."""

from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from app.digest import merkle
from app.tlog import checkpoint, note, tiles


def _leaves(n: int) -> list[bytes]:
    return [merkle.leaf_hash(f"entry {i}".encode()) for i in range(n)]


def _elements(leaves: list[bytes]) -> tiles.Elements:
    async def read(level: int, start: int, count: int) -> list[bytes]:
        span = tiles.WIDTH**level
        return [
            tiles.root_of(leaves[(start + i) * span : (start + i + 1) * span]) for i in range(count)
        ]

    return read


@pytest.mark.parametrize(
    ("n", "path"),
    [(0, "000"), (5, "005"), (1234, "x001/234"), (1234067, "x001/x234/067"), (1000, "x001/000")],
)
def test_tile_index_paths(n: int, path: str) -> None:
    assert tiles.encode_index(n) == path
    assert tiles.parse_index(path) == (n, 256)
    assert tiles.parse_index(path + ".p/17") == (n, 17)


@pytest.mark.parametrize(
    "bad", ["", "1", "01", "x1/234", "x000/001", "001.p/0", "001.p/256", "001.p/07", "a01"]
)
def test_bad_tile_indexes(bad: str) -> None:
    with pytest.raises(tiles.TileError):
        tiles.parse_index(bad)


def test_entry_bundles_round_trip() -> None:
    entries = [b"", b"a", b"x" * 600]
    assert tiles.split_bundle(tiles.entry_bundle(entries)) == entries
    with pytest.raises(tiles.TileError):
        tiles.split_bundle(tiles.entry_bundle(entries)[:-1])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 700), st.data())
async def test_compact_range_and_proofs_match_the_whole_tree(n: int, data: st.DataObject) -> None:
    leaves = _leaves(n)
    compact = tiles.CompactRange()
    for leaf in leaves:
        compact.append(leaf)
    assert compact.root() == merkle.root(leaves)
    elements = _elements(leaves)
    assert await tiles.subtree(elements, 0, n) == merkle.root(leaves)
    index = data.draw(st.integers(0, n - 1))
    proof = await tiles.inclusion_proof(elements, index, n)
    assert proof == merkle.audit_path(merkle.levels(leaves), index)
    assert merkle.verify_inclusion(leaves[index], index, n, proof, merkle.root(leaves))
    old = data.draw(st.integers(0, n))
    consistency = await tiles.consistency_proof(elements, old, n)
    if 0 < old < n:
        assert consistency == merkle.consistency_proof(merkle.levels(leaves), old)
        implied = merkle.root_from_consistency(old, merkle.root(leaves[:old]), n, consistency)
        assert implied == merkle.root(leaves)


def test_signed_note_and_cosignature() -> None:
    log_key, witness_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    body = checkpoint.Checkpoint("reports.example/log", 3, hashlib.sha256(b"r").digest()).text()
    signed = note.signed_note(body, [note.sign(body, "reports.example/log", log_key)])
    verifier = note.Verifier("reports.example/log", note.raw(log_key.public_key()))
    assert note.parse_vkey(verifier.vkey()) == verifier
    assert note.verify(signed, verifier) == body
    assert checkpoint.parse(body).size == 3
    other = note.Verifier("reports.example/log", note.raw(witness_key.public_key()))
    with pytest.raises(note.NoteError):
        note.verify(signed, other)
    tampered = signed.replace(b"\n3\n", b"\n4\n")
    with pytest.raises(note.NoteError):
        note.verify(tampered, verifier)
    witness = note.Verifier("w1", note.raw(witness_key.public_key()), note.COSIGNATURE_V1)
    cosignature = note.cosign(body, "w1", witness_key, 1_700_000_000)
    assert note.verify_cosignature(body, cosignature, witness)
    assert not note.verify_cosignature(body.replace("3", "4"), cosignature, witness)
    _, signatures = note.split(note.signed_note(body, [cosignature]))
    assert signatures == [cosignature]


@pytest.mark.parametrize(
    "bad", ["o\n3\n", "o\n03\nAAAA\n", "\n3\n" + "A" * 44 + "\n", "o\n3\nnot base64\n"]
)
def test_bad_checkpoints(bad: str) -> None:
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.parse(bad)
