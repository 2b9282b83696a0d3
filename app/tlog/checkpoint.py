"""C2SP tlog-checkpoint bodies (https://c2sp.org/tlog-checkpoint): origin, tree size, root."""

from __future__ import annotations

import base64
from dataclasses import dataclass


class CheckpointError(ValueError):
    """A checkpoint body that is not well formed."""


@dataclass(frozen=True)
class Checkpoint:
    """A log's tree size and root hash, as its origin states them."""

    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        """The note text: three lines, each ending with a newline."""
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"


def parse(text: str) -> Checkpoint:
    """A checkpoint from its note text (extension lines are allowed and ignored)."""
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise CheckpointError("a checkpoint is an origin, a size and a root, each on a line")
    origin, size, root = lines[0], lines[1], lines[2]
    decimal = size.isascii() and size.isdigit() and (size == "0" or not size.startswith("0"))
    if not origin or not decimal:
        # ASCII digits only (str.isdigit alone takes any script's); the Node verifier's words.
        raise CheckpointError("a checkpoint is an origin, a size and a root, each on a line")
    try:
        digest = base64.b64decode(root, validate=True)
    except ValueError as exc:
        raise CheckpointError("a checkpoint's root hash is base64") from exc
    if len(digest) != 32:
        raise CheckpointError("a checkpoint's root hash is 32 bytes")
    return Checkpoint(origin, int(size), digest)
