"""Evidence manifests as stored: each entry's 32 digest bytes, not its JSON text.

A manifest is a canonical JSON array of `sha256:<64 lowercase hex>` strings, 74 bytes an entry
with its quotes and comma; stored as the digests' bytes it is 32 (no compressor shrinks hex
digests much). A large check's manifest is tens of megabytes, and writing it was a quarter of a
10-million-case finish. Both directions are exact: `digests_of` accepts only the form
`document_of` writes.
"""

from __future__ import annotations

import binascii
import hashlib

import numpy as np

_PREFIX = np.frombuffer(b'"sha256:', dtype=np.uint8)
_QUOTE, _COMMA, _OPEN, _CLOSE = ord('"'), ord(","), ord("["), ord("]")
ENTRY = len('"sha256:",') + 64
DIGEST_BYTES = 32


class NotAManifest(ValueError):
    """The document is not a canonical JSON array of sha256 digests."""


def digests_of(document: bytes) -> bytes:
    """The digests of a manifest document, 32 bytes each, in order."""
    count, rest = divmod(len(document) - 1, ENTRY)
    if rest or not count or document[:1] != b"[":
        raise NotAManifest("not an array of sha256 digests")
    # Entry by entry; the last entry ends with the closing bracket where the others have a comma.
    rows = np.frombuffer(document, dtype=np.uint8, count=count * ENTRY, offset=1)
    rows = rows.reshape(count, ENTRY)
    hexes = np.ascontiguousarray(rows[:, 8:72])
    if not (
        (rows[:, :8] == _PREFIX).all()
        and (rows[:, 72] == _QUOTE).all()
        and (rows[:-1, 73] == _COMMA).all()
        and rows[-1, 73] == _CLOSE
        # unhexlify reads upper case too; a canonical digest is lower case.
        and not ((hexes >= ord("A")) & (hexes <= ord("F"))).any()
    ):
        raise NotAManifest("not an array of sha256 digests")
    try:
        return binascii.unhexlify(hexes.data)
    except binascii.Error:
        raise NotAManifest("not an array of sha256 digests") from None


def document_of(digests: bytes) -> bytes:
    """The manifest document (canonical JSON) of stored digests."""
    count, rest = divmod(len(digests), DIGEST_BYTES)
    if rest or not count:
        raise NotAManifest("stored digests come in 32-byte units")
    document = np.empty(1 + count * ENTRY, dtype=np.uint8)
    document[0] = _OPEN
    rows = document[1:].reshape(count, ENTRY)
    rows[:, :8] = _PREFIX
    rows[:, 8:72] = np.frombuffer(binascii.hexlify(digests), dtype=np.uint8).reshape(count, 64)
    rows[:, 72] = _QUOTE
    rows[:, 73] = _COMMA
    document[-1] = _CLOSE  # in place of the last comma
    return document.tobytes()


# Entries hashed at a time by `manifest_of_digest_rows`: about a megabyte, reused block to block
# (it stays in the cache; 65,536 at a time was slower).
BLOCK_ENTRIES = 16_384
_DIGEST_PREFIX = _PREFIX[1:]  # without the opening quote


def manifest_of_digest_rows(rows: np.ndarray, block: int = BLOCK_ENTRIES) -> tuple[str, bytes]:
    """The manifest of digests given as rows of their 71 characters (`sha256:<64 hex>`, a
    uint8 array of shape (n, 71)): its digest, `sha256:` and the hex SHA-256 of the document
    `document_of` writes, and its stored form (`digests_of` of that document). Built a block
    of entries at a time, so a long manifest's document is never held whole; refuses what
    `digests_of` refuses."""
    count = rows.shape[0]
    if not count:
        raise NotAManifest("stored digests come in 32-byte units")
    size = min(block, count)
    entries = np.empty((size, ENTRY), dtype=np.uint8)
    entries[:, 0] = _QUOTE
    entries[:, 72] = _QUOTE
    entries[:, 73] = _COMMA
    hexes = np.empty((size, 64), dtype=np.uint8)
    document = hashlib.sha256(b"[")
    stored = []
    for start in range(0, count, block):
        part = rows[start : start + block]
        taken = part.shape[0]
        if not (part[:, :7] == _DIGEST_PREFIX).all():
            raise NotAManifest("not an array of sha256 digests")
        hexes[:taken] = part[:, 7:]
        text = hexes[:taken].reshape(-1).data
        try:
            digests = binascii.unhexlify(text)
        except binascii.Error:
            raise NotAManifest("not an array of sha256 digests") from None
        # unhexlify reads upper case too. Of the hex digits, only 'A' to 'F' lack bit 0x20.
        if not np.bitwise_and.reduce(hexes[:taken], axis=None) & 0x20:
            raise NotAManifest("not an array of sha256 digests")
        stored.append(digests)
        entries[:taken, 1:72] = part
        if start + taken == count:
            entries[taken - 1, 73] = _CLOSE  # in place of the last comma
        document.update(entries[:taken].reshape(-1).data)
    return "sha256:" + document.hexdigest(), b"".join(stored)
