"""Evidence manifests stored as digests: both directions exact, anything else refused."""

from __future__ import annotations

import hashlib

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from app.manifest_digests import NotAManifest, digests_of, document_of

raw_digests = st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=300)


def document(digests: list[bytes]) -> bytes:
    """The manifest document as RFC 8785 writes the list of digest strings."""
    return rfc8785.dumps(["sha256:" + d.hex() for d in digests])


@given(raw_digests)
def test_a_document_and_its_digests_give_each_other_back(digests: list[bytes]) -> None:
    written = document(digests)
    stored = digests_of(written)
    assert stored == b"".join(digests)
    assert document_of(stored) == written


SOME = [hashlib.sha256(bytes([i])).digest() for i in range(3)]
GOOD = document(SOME)
LETTER = next(i for i in range(9, len(GOOD)) if GOOD[i] in b"abcdef")


@pytest.mark.parametrize(
    "bad",
    [
        b"[]",
        b"",
        GOOD[:-1],
        GOOD + b"\n",
        GOOD.replace(b",", b", ", 1),
        GOOD.replace(b"sha256:", b"sha512:", 1),
        GOOD[:LETTER] + GOOD[LETTER : LETTER + 1].upper() + GOOD[LETTER + 1 :],
        GOOD.replace(GOOD[9:10], b"g", 1),
        GOOD.replace(b'"]', b'",]'),
        b"{" + GOOD[1:-1] + b"}",
        GOOD[:-1] + b",",
    ],
)
def test_anything_but_a_canonical_digest_array_is_refused(bad: bytes) -> None:
    with pytest.raises(NotAManifest):
        digests_of(bad)


@pytest.mark.parametrize("bad", [b"", b"x" * 31, b"x" * 33])
def test_stored_digests_come_in_32_byte_units(bad: bytes) -> None:
    with pytest.raises(NotAManifest):
        document_of(bad)
