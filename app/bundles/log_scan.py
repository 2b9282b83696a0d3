"""`--log URL`: the entries a served log holds after a report's entry, up to the checkpoint a
bundle carries, proven by recomputing that checkpoint's root from them (and from the served
hash tiles before them). Standard library only (urllib): the verifier needs no HTTP package."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from app.digest.merkle import leaf_hash
from app.tlog import tiles


class ScanError(Exception):
    """The served log cannot be read, or does not lead to the bundle's checkpoint."""


class _Tiles:
    """The served tiles of a tree of `size` entries (partial ones at its width)."""

    def __init__(self, base_url: str, size: int) -> None:
        self.base = base_url.rstrip("/")
        self.size = size
        self.cache: dict[tuple[int, int], bytes] = {}

    def tile(self, level: int, n: int) -> bytes:
        """Tile `n` of a level (-1: the entry bundles)."""
        key = (level, n)
        if key not in self.cache:
            held = self.size >> (tiles.HEIGHT * max(level, 0))
            width = min(tiles.WIDTH, held - n * tiles.WIDTH)
            url = f"{self.base}/{tiles.Tile(level, n, width).path()}"
            request = urllib.request.Request(url, headers={"User-Agent": "evalbook-verify"})
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    data: bytes = answer.read()
            except urllib.error.HTTPError as exc:
                raise ScanError(f"{url}: HTTP {exc.code}") from None
            except OSError:
                # The Node verifier's words, whatever the platform's reason.
                raise ScanError(f"{url}: unreachable") from None
            if level >= 0 and len(data) != width * tiles.HASH:
                raise ScanError(f"{url}: a tile of {width} hashes is {width * tiles.HASH} bytes")
            self.cache[key] = data
        return self.cache[key]

    async def elements(self, level: int, start: int, count: int) -> list[bytes]:
        """Hashes [start, start + count) of a level."""
        out = []
        for i in range(start, start + count):
            n, at = divmod(i, tiles.WIDTH)
            out.append(self.tile(level, n)[at * tiles.HASH : (at + 1) * tiles.HASH])
        return out


def entries_after(base_url: str, tree: tuple[int, bytes], index: int) -> list[tuple[int, bytes]]:
    """(index, entry) of every entry after `index` in the tree (size, root) the log at
    `base_url` serves; ScanError unless they and the tiles before them give that root."""
    size, root = tree
    served = _Tiles(base_url, size)
    # The tiles before the report's own entry bundle give the compact range of that prefix.
    prefix = (index + 1) // tiles.WIDTH * tiles.WIDTH
    compact = tiles.CompactRange()
    start = 0
    for height in reversed(range(prefix.bit_length())):
        if prefix >> height & 1:
            end = start + (1 << height)
            compact.roots.append((height, asyncio.run(tiles.subtree(served.elements, start, end))))
            start = end
    compact.size = prefix
    found: list[tuple[int, bytes]] = []
    for n in range(prefix // tiles.WIDTH, -(-size // tiles.WIDTH)):
        try:
            entries = tiles.split_bundle(served.tile(-1, n))
        except tiles.TileError as exc:
            raise ScanError(f"entry bundle {n}: {exc}") from None
        for entry in entries:
            found.append((compact.size, entry))
            compact.append(leaf_hash(entry))
    if compact.size != size or compact.root() != root:
        raise ScanError("the served entries do not lead to the bundle's checkpoint root")
    return [(i, entry) for i, entry in found if i > index]
