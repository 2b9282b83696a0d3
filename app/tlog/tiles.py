"""C2SP tlog-tiles (https://c2sp.org/tlog-tiles): tile paths, entry bundles, and the RFC 6962
tree of a log computed from its tiles (height 8: a tile holds up to 256 hashes)."""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from app.digest.merkle import node_hash

HEIGHT = 8
WIDTH = 1 << HEIGHT
HASH = 32
_PATH = re.compile(r"^(?:x[0-9]{3}/)*[0-9]{3}(?:\.p/([0-9]{1,3}))?$")
# The longest index path: a log's size fits in 64 bits, 20 digits in 7 groups (`x000/` 6 times,
# then 3 digits), and a partial width. Longer text is refused before any digit is converted.
MAX_INDEX_TEXT = 6 * 5 + 3 + len(".p/255")


class TileError(ValueError):
    """A tile path that does not name a tile."""


@dataclass(frozen=True)
class Tile:
    """Level `level` (or the entries, level -1), index `n`, `width` hashes (256 when full)."""

    level: int
    n: int
    width: int = WIDTH

    @property
    def full(self) -> bool:
        """A full tile never changes."""
        return self.width == WIDTH

    def path(self) -> str:
        """Its path under the log's prefix."""
        kind = "entries" if self.level < 0 else str(self.level)
        return f"tile/{kind}/{encode_index(self.n)}" + ("" if self.full else f".p/{self.width}")


def encode_index(n: int) -> str:
    """An index as C2SP writes it: groups of three digits, all but the last prefixed `x`."""
    digits = f"{n:03d}"
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*(f"x{g}" for g in groups[:-1]), groups[-1]])


def parse_index(text: str) -> tuple[int, int]:
    """(index, width) from `x001/234[.p/W]` (ASCII digits only, length checked before any
    conversion); TileError for anything else."""
    if len(text) > MAX_INDEX_TEXT or _PATH.fullmatch(text) is None:
        raise TileError(f"not a tile index: {text[:80]!r}")
    core, _, suffix = text.partition(".p/")
    width = int(suffix) if suffix else WIDTH
    if suffix and (not 1 <= width < WIDTH or suffix.startswith("0")):
        raise TileError("a partial tile's width is from 1 to 255")
    groups = core.split("/")
    if len(groups) > 1 and groups[0] == "x000":
        raise TileError("an index has no leading zero groups")
    return int("".join(g.lstrip("x") for g in groups)), width


def entry_bundle(entries: Sequence[bytes]) -> bytes:
    """Entries as a C2SP entry bundle: each a big-endian uint16 length, then its bytes."""
    return b"".join(struct.pack(">H", len(e)) + e for e in entries)


def split_bundle(data: bytes) -> list[bytes]:
    """The entries of an entry bundle; TileError when it is cut short."""
    out, at = [], 0
    while at < len(data):
        if at + 2 > len(data):
            raise TileError("an entry bundle ends inside a length")
        (length,) = struct.unpack(">H", data[at : at + 2])
        if at + 2 + length > len(data):
            raise TileError("an entry bundle ends inside an entry")
        out.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    return out


def root_of(hashes: Sequence[bytes]) -> bytes:
    """The RFC 6962 root of a run of hashes (a complete run, or the right edge of a tree)."""
    level = list(hashes)
    if len(level) == 1:
        return level[0]
    split = 1 << ((len(level) - 1).bit_length() - 1)
    return node_hash(root_of(level[:split]), root_of(level[split:]))


@dataclass
class CompactRange:
    """The roots of the complete subtrees a tree of `size` leaves is made of (largest first):
    enough to append leaves and to compute the root."""

    size: int = 0
    roots: list[tuple[int, bytes]] = field(default_factory=list)

    def append(self, leaf: bytes) -> None:
        """Add one leaf hash at index `size`."""
        height, value = 0, leaf
        while self.roots and self.roots[-1][0] == height:
            _, left = self.roots.pop()
            value = node_hash(left, value)
            height += 1
        self.roots.append((height, value))
        self.size += 1

    @classmethod
    def stored(cls, size: int, joined: bytes) -> CompactRange:
        """A range as `joined()` stored it: one hash per set bit of `size`, largest first."""
        heights = [h for h in reversed(range(size.bit_length())) if size >> h & 1]
        if len(joined) != HASH * len(heights):
            raise TileError(f"a compact range of {size} leaves holds {len(heights)} hashes")
        hashes = [joined[i * HASH : (i + 1) * HASH] for i in range(len(heights))]
        return cls(size, list(zip(heights, hashes, strict=True)))

    def joined(self) -> bytes:
        """Its hashes, largest subtree first (what a checkpoint row keeps)."""
        return b"".join(value for _, value in self.roots)

    def root(self) -> bytes:
        """The tree's RFC 6962 root (the empty tree's is SHA-256 of nothing)."""
        if not self.roots:
            return hashlib.sha256(b"").digest()
        value = self.roots[-1][1]
        for _, left in reversed(self.roots[:-1]):
            value = node_hash(left, value)
        return value


# Reads `count` hashes of a level from `start`: level 0 are the leaf hashes, level L the roots
# of the complete subtrees of 256**L leaves.
Elements = Callable[[int, int, int], Awaitable[list[bytes]]]


async def subtree(elements: Elements, start: int, end: int) -> bytes:
    """The RFC 6962 hash of leaves [start, end) of a tree holding at least `end` leaves."""
    size = end - start
    if size & (size - 1) == 0 and start % size == 0:
        height = size.bit_length() - 1
        level, rest = divmod(height, HEIGHT)
        first = start >> (HEIGHT * level)
        return root_of(await elements(level, first, 1 << rest))
    split = 1 << ((size - 1).bit_length() - 1)
    left = await subtree(elements, start, start + split)
    return node_hash(left, await subtree(elements, start + split, end))


async def inclusion_proof(elements: Elements, index: int, size: int) -> list[bytes]:
    """RFC 9162 section 2.1.3.1: the audit path of leaf `index` in a tree of `size`."""
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        split = 1 << ((end - start - 1).bit_length() - 1)
        if index < start + split:
            path.append(await subtree(elements, start + split, end))
            end = start + split
        else:
            path.append(await subtree(elements, start, start + split))
            start += split
    return list(reversed(path))


async def consistency_proof(elements: Elements, old: int, new: int) -> list[bytes]:
    """RFC 9162 section 2.1.4.1: the proof that the tree of `old` leaves is a prefix of the
    tree of `new` leaves (empty when old is 0 or old equals new)."""
    if old == 0 or old == new:
        return []

    async def proof(m: int, start: int, end: int, complete: bool) -> list[bytes]:
        size = end - start
        if m == size:
            return [] if complete else [await subtree(elements, start, end)]
        split = 1 << ((size - 1).bit_length() - 1)
        if m <= split:
            return [
                *await proof(m, start, start + split, complete),
                await subtree(elements, start + split, end),
            ]
        return [
            *await proof(m - split, start + split, end, False),
            await subtree(elements, start, start + split),
        ]

    return await proof(old, 0, new, True)


def accepts_gzip(header: str) -> bool:
    """Whether an Accept-Encoding header takes gzip (and does not refuse it with q=0)."""
    for part in header.split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() in ("gzip", "x-gzip"):
            return params.replace(" ", "").lower() not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False
