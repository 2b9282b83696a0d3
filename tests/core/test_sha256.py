"""The short-message SHA-256 (StringZilla) against hashlib, the oracle, at every block
boundary and on random messages; the hot paths that use it against the careful paths."""

from __future__ import annotations

import hashlib
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from app.digest import merkle
from app.digest.sha256 import LANE_BATCH, node_digests, short_digest, short_digests


def test_every_length_across_the_block_boundaries_equals_hashlib() -> None:
    # SHA-256 pads to 64-byte blocks: 55/56 and 119/120 bytes are where a message spills into
    # one more block.
    for length in range(0, 300):
        message = os.urandom(length)
        assert short_digest(message) == hashlib.sha256(message).digest(), length


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000))
def test_random_messages_equal_hashlib(message: bytes) -> None:
    expected = hashlib.sha256(message).digest()
    assert short_digest(message) == expected
    assert short_digest(bytearray(message)) == expected
    assert short_digest(memoryview(message)) == expected


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_utf8_of_any_text_equals_hashlib(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    assert short_digest(data) == hashlib.sha256(data).digest()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=40))
def test_many_messages_in_lanes_equal_hashlib(messages: list[bytes]) -> None:
    """Messages of any lengths side by side in one call, each against its own hashlib digest."""
    assert short_digests(messages) == [hashlib.sha256(m).digest() for m in messages]
    views = [memoryview(m) for m in messages]
    assert short_digests(views) == [hashlib.sha256(m).digest() for m in messages]


def test_lanes_across_batches_and_block_boundaries_equal_hashlib() -> None:
    # More messages than one call takes, every length from 0 to 299 among them.
    messages = [os.urandom(index % 300) for index in range(2 * LANE_BATCH + 17)]
    assert short_digests(messages) == [hashlib.sha256(m).digest() for m in messages]
    lefts = [os.urandom(32) for _ in range(LANE_BATCH + 3)]
    rights = [os.urandom(index % 70) for index in range(LANE_BATCH + 3)]
    assert node_digests(b"\x01", lefts, rights) == [
        hashlib.sha256(b"\x01" + left + right).digest()
        for left, right in zip(lefts, rights, strict=True)
    ]
    assert short_digests([]) == node_digests(b"\x01", [], []) == []
    # Below LANES_FROM, one call a message: the same digests.
    few = lefts[:3], rights[:3]
    assert node_digests(b"\x01", *few) == [
        hashlib.sha256(b"\x01" + left + right).digest() for left, right in zip(*few, strict=True)
    ]


def test_tree_nodes_and_leaves_equal_hashlib() -> None:
    left, right = os.urandom(32), os.urandom(32)
    assert merkle.node_hash(left, right) == hashlib.sha256(b"\x01" + left + right).digest()
    assert merkle.leaf_hash(b"record") == hashlib.sha256(b"\x00record").digest()
    leaves = os.urandom(32 * 7)
    pairs = [leaves[i : i + 32] for i in range(0, len(leaves), 32)]

    def reference(nodes: list[bytes]) -> bytes:
        """RFC 6962's MTH by its split at the largest power of two below n, with hashlib."""
        if len(nodes) == 1:
            return nodes[0]
        k = 1
        while k * 2 < len(nodes):
            k *= 2
        return hashlib.sha256(b"\x01" + reference(nodes[:k]) + reference(nodes[k:])).digest()

    assert merkle.root_of_joined(leaves) == merkle.root(pairs) == reference(pairs)
    # Trees wider than a batch of lanes, of even and odd widths.
    for count in (2 * LANE_BATCH + 2, 2 * LANE_BATCH + 3):
        leaves = os.urandom(32 * count)
        pairs = [leaves[i : i + 32] for i in range(0, len(leaves), 32)]
        assert merkle.root_of_joined(leaves) == merkle.root(pairs) == reference(pairs)
