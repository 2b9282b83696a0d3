"""SHA-256 of short messages, for the paths that hash one per case or per tree node.

On OpenSSL 3.0, `hashlib.sha256(data).digest()` spends about half a microsecond setting up and
tearing down an EVP context before it hashes a byte: more than hashing a case's 300-byte leaf
input takes. StringZilla's one-shot `sha256` (SHA-NI where the CPU has it) costs a fraction of
that per call. For long inputs hashlib is as fast or faster, so documents, bodies and files keep
hashlib; tests hold the two equal, hashlib being the oracle. Many messages at once (a batch's
leaves and outputs, a tree level's nodes) go through StringZilla's `Sha256s`, which compresses
them side by side in SIMD lanes, in one call: about 0.13 µs a message against 0.2–0.4 µs a
call.

Bytes only, never a `str`: StringZilla reads a str's UTF-8 itself and crashed on a lone
surrogate (5.3.2), where `str.encode` raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import stringzilla

Buffer = bytes | bytearray | memoryview

# The 32-byte SHA-256 digest of a short bytes-like message.
short_digest: Callable[[Buffer], bytes] = stringzilla.sha256

# Messages hashed in one call: a lane costs 128 bytes, so a batch stays within the caches.
LANE_BATCH = 4096
# Fewer messages than this are hashed one call each: setting lanes up costs about 3 µs.
LANES_FROM = 16


def short_digests(messages: Sequence[Buffer]) -> list[bytes]:
    """The SHA-256 digests of many short messages, in order."""
    if len(messages) < LANES_FROM:
        return list(map(short_digest, messages))
    digests: list[bytes] = []
    for start in range(0, len(messages), LANE_BATCH):
        batch = messages[start : start + LANE_BATCH]
        lanes = stringzilla.Sha256s(len(batch))
        lanes.update(batch)
        digests += lanes.digest()
    return digests


def node_digests(prefix: bytes, lefts: Sequence[Buffer], rights: Sequence[Buffer]) -> list[bytes]:
    """SHA-256(prefix || lefts[i] || rights[i]) for every i, without joining the parts."""
    if len(lefts) < LANES_FROM:
        return [
            short_digest(b"".join((prefix, left, right)))
            for left, right in zip(lefts, rights, strict=True)
        ]
    digests: list[bytes] = []
    for start in range(0, len(lefts), LANE_BATCH):
        batch = lefts[start : start + LANE_BATCH]
        lanes = stringzilla.Sha256s(len(batch))
        lanes.update([prefix] * len(batch))
        lanes.update(batch)
        lanes.update(rights[start : start + LANE_BATCH])
        digests += lanes.digest()
    return digests
