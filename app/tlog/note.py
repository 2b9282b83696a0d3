"""C2SP signed notes (https://c2sp.org/signed-note) with Ed25519 signatures, and C2SP
tlog-cosignature/v1 witness cosignatures (https://c2sp.org/tlog-cosignature)."""

from __future__ import annotations

import base64
import hashlib
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ED25519 = 0x01
COSIGNATURE_V1 = 0x04
DASH = "\u2014 "


class NoteError(ValueError):
    """A note, key or signature that is not well formed."""


def key_hash(name: str, alg: int, public: bytes) -> bytes:
    """The 4-byte key hash: SHA-256(name || LF || alg || public key), first 4 bytes."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([alg]) + public).digest()[:4]


def raw(public: Ed25519PublicKey) -> bytes:
    """A public key's 32 raw bytes."""
    # Imported here: the offline verifier's command line loads no key-file machinery.
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


@dataclass(frozen=True)
class Verifier:
    """A named Ed25519 key: a log's note key (alg 0x01) or a witness's (alg 0x04)."""

    name: str
    public: bytes
    alg: int = ED25519

    @property
    def hash(self) -> bytes:
        """Its key hash."""
        return key_hash(self.name, self.alg, self.public)

    def vkey(self) -> str:
        """The verifier key string: `<name>+<hash hex>+<base64(alg || key)>`."""
        encoded = base64.b64encode(bytes([self.alg]) + self.public).decode()
        return f"{self.name}+{self.hash.hex()}+{encoded}"


def parse_vkey(text: str) -> Verifier:
    """A verifier key string (Ed25519 or cosignature/v1) as a Verifier."""
    try:
        name, hash_hex, encoded = text.strip().split("+", 2)
        key = base64.b64decode(encoded, validate=True)
    except ValueError as exc:
        raise NoteError(f"not a verifier key: {text[:80]!r}") from exc
    if not name or len(key) != 33 or key[0] not in (ED25519, COSIGNATURE_V1):
        raise NoteError(f"not an Ed25519 verifier key: {text[:80]!r}")
    verifier = Verifier(name, key[1:], key[0])
    if verifier.hash.hex() != hash_hex:
        raise NoteError(f"the key hash of {name!r} does not match its key")
    return verifier


@dataclass(frozen=True)
class Signature:
    """One signature line of a note."""

    name: str
    data: bytes

    def line(self) -> str:
        """The line as a note carries it."""
        return f"{DASH}{self.name} {base64.b64encode(self.data).decode()}\n"


def sign(text: str, name: str, key: Ed25519PrivateKey) -> Signature:
    """An Ed25519 note signature of `text` (which ends with a newline)."""
    public = raw(key.public_key())
    return Signature(name, key_hash(name, ED25519, public) + key.sign(text.encode()))


def signed_note(text: str, signatures: list[Signature]) -> bytes:
    """The note: its text, a blank line, then each signature line."""
    if not text.endswith("\n"):
        raise NoteError("a note's text ends with a newline")
    return (text + "\n" + "".join(s.line() for s in signatures)).encode()


def split(note: bytes) -> tuple[str, list[Signature]]:
    """A note's text and signature lines (unverified)."""
    try:
        whole = note.decode()
    except UnicodeDecodeError as exc:
        raise NoteError("a note is UTF-8") from exc
    text, sep, block = whole.rpartition("\n\n")
    if not sep or not block.endswith("\n"):
        raise NoteError("a note is its text, a blank line and its signatures")
    signatures = []
    for line in block[:-1].split("\n"):
        if not line.startswith(DASH):
            raise NoteError(f"not a signature line: {line[:80]!r}")
        name, _, encoded = line[len(DASH) :].rpartition(" ")
        try:
            data = base64.b64decode(encoded, validate=True)
        except ValueError as exc:
            raise NoteError(f"a signature of {name!r} is not base64") from exc
        if not name or len(data) < 4:
            raise NoteError("a signature line names its key and carries its key hash")
        signatures.append(Signature(name, data))
    return text + "\n", signatures


def verify(note: bytes, verifier: Verifier) -> str:
    """The note's text when `verifier` signed it (Ed25519 note signature); NoteError else,
    and for a note that also carries a bad signature under the verifier's own name and key id
    (as Go's note.Open refuses one: a forger's line beside the real one is a forgery)."""
    text, signatures = split(note)
    valid = False
    for signature in signatures:
        if signature.name == verifier.name and signature.data[:4] == verifier.hash:
            try:
                Ed25519PublicKey.from_public_bytes(verifier.public).verify(
                    signature.data[4:], text.encode()
                )
            except InvalidSignature:
                raise NoteError(
                    f"a signature under {verifier.name!r} and its key id does not verify"
                ) from None
            valid = True
    if not valid:
        raise NoteError(f"no valid signature of {verifier.name!r} on the note")
    return text


def cosigned_message(text: str, timestamp: int) -> bytes:
    """What a tlog-cosignature/v1 signs: a header, the time, then the checkpoint's text."""
    return f"cosignature/v1\ntime {timestamp}\n".encode() + text.encode()


def cosign(text: str, name: str, key: Ed25519PrivateKey, timestamp: int) -> Signature:
    """A witness's cosignature of a checkpoint's text at `timestamp` (seconds)."""
    public = raw(key.public_key())
    signed = key.sign(cosigned_message(text, timestamp))
    return Signature(
        name, key_hash(name, COSIGNATURE_V1, public) + struct.pack(">Q", timestamp) + signed
    )


def verify_cosignature(text: str, signature: Signature, verifier: Verifier) -> bool:
    """Whether `signature` is `verifier`'s valid cosignature of the checkpoint `text`."""
    data = signature.data
    if (
        verifier.alg != COSIGNATURE_V1
        or signature.name != verifier.name
        or len(data) != 4 + 8 + 64
        or data[:4] != verifier.hash
    ):
        return False
    (timestamp,) = struct.unpack(">Q", data[4:12])
    try:
        Ed25519PublicKey.from_public_bytes(verifier.public).verify(
            data[12:], cosigned_message(text, timestamp)
        )
    except InvalidSignature:
        return False
    return True
