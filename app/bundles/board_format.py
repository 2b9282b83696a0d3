"""What a board bundle is (docs/boards.md, "Proof"), shared by its builder and its verifier."""

from __future__ import annotations

from pathlib import Path

import orjson

from app.bundles.results import NotABundle
from app.bundles.stream import GzipDamage, read_batches

BOARD_FORMAT = "evalbook.board_bundle.v1"
BOARD_MEDIA_TYPE = "application/vnd.evalbook.board-bundle.v1+jsonl.gzip"
# Line kinds in their order: header, board, suite_version, then per subject a report and its
# cases, then the trailer.
BOARD_KINDS = ("header", "board", "suite_version", "report", "case", "trailer")


def is_board_bundle(path: Path) -> bool:
    """Whether a gzip bundle's first line is a board bundle's header."""
    try:
        with path.open("rb") as handle:
            for batch in read_batches(handle, None):
                if batch:
                    header = orjson.loads(batch[0])
                    return type(header) is dict and header.get("format") == BOARD_FORMAT
    except (NotABundle, GzipDamage, orjson.JSONDecodeError):
        return False
    return False
