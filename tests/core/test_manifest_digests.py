"""Evidence manifests stored as digests: both directions exact, anything else refused."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from app.digest.manifest_digests import (
    NotAManifest,
    digests_of,
    document_of,
    manifest_of_digest_rows,
)

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


def digest_rows(texts: list[bytes]) -> np.ndarray:
    """Digests as finish reads them: rows of their 71 characters."""
    return np.frombuffer(b"".join(texts), dtype=np.uint8).reshape(len(texts), 71)


@given(raw_digests, st.sampled_from([1, 2, 3, 7, 64, 65_536]))
def test_a_manifest_built_block_by_block_is_the_documents(digests: list[bytes], block: int) -> None:
    written = document(digests)
    rows = digest_rows([b"sha256:" + d.hex().encode() for d in digests])
    digest, stored = manifest_of_digest_rows(rows, block)
    assert digest == "sha256:" + hashlib.sha256(written).hexdigest()
    assert stored == digests_of(written) == b"".join(digests)


def test_a_manifest_of_rows_in_a_strided_view_is_the_same() -> None:
    """Finish passes the output-digest field of its COPY rows: a view with a wider stride."""
    texts = [b"sha256:" + d.hex().encode() for d in SOME * 5]
    wide = np.zeros((len(texts), 100), dtype=np.uint8)
    wide[:, 10:81] = digest_rows(texts)
    assert manifest_of_digest_rows(wide[:, 10:81], 4) == manifest_of_digest_rows(digest_rows(texts))


TEXT = b"sha256:" + SOME[0].hex().encode()
UPPER = TEXT.index(next(c for c in TEXT[7:] if c in b"abcdef"), 7)


@pytest.mark.parametrize(
    "bad",
    [
        TEXT.replace(b"sha256:", b"sha512:"),
        TEXT[:UPPER] + TEXT[UPPER : UPPER + 1].upper() + TEXT[UPPER + 1 :],
        TEXT[:-1] + b"g",
        TEXT[:-1] + b"-",
        b"-" * 71,
    ],
)
@pytest.mark.parametrize("at", [0, 4])
def test_digest_rows_in_any_other_form_are_refused(bad: bytes, at: int) -> None:
    texts = [TEXT] * 6
    texts[at] = bad
    with pytest.raises(NotAManifest):
        manifest_of_digest_rows(digest_rows(texts), 3)


def test_no_digest_rows_make_no_manifest() -> None:
    with pytest.raises(NotAManifest):
        manifest_of_digest_rows(np.empty((0, 71), dtype=np.uint8))
