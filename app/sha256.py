"""SHA-256 of short messages, for the paths that hash one per case or per tree node.

On OpenSSL 3.0, `hashlib.sha256(data).digest()` spends about half a microsecond setting up and
tearing down an EVP context before it hashes a byte: more than hashing a case's 300-byte leaf
input takes. StringZilla's one-shot `sha256` (SHA-NI where the CPU has it) costs a fraction of
that per call. For long inputs hashlib is as fast or faster, so documents, bodies and files keep
hashlib; tests hold the two equal, hashlib being the oracle.

Bytes only, never a `str`: StringZilla reads a str's UTF-8 itself and crashed on a lone
surrogate (5.3.2), where `str.encode` raises.
"""

from __future__ import annotations

from collections.abc import Callable

import stringzilla

Buffer = bytes | bytearray | memoryview

# The 32-byte SHA-256 digest of a short bytes-like message.
short_digest: Callable[[Buffer], bytes] = stringzilla.sha256
