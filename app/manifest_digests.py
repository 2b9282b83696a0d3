"""Evidence manifests as stored: each entry's 32 digest bytes, not its JSON text.

A manifest is a canonical JSON array of `sha256:<64 lowercase hex>` strings, 74 bytes an entry
with its quotes and comma; stored as the digests' bytes it is 32 (no compressor shrinks hex
digests much). A large check's manifest is tens of megabytes, and writing it was a quarter of a
10-million-case finish. Both directions are exact: `digests_of` accepts only the form
`document_of` writes.
"""

from __future__ import annotations

import binascii

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
