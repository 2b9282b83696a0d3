"""What a board bundle is (docs/boards.md, "Proof"), shared by its builder and its verifier."""

from __future__ import annotations

BOARD_FORMAT = "evalbook.board_bundle.v1"
BOARD_MEDIA_TYPE = "application/vnd.evalbook.board-bundle.v1+jsonl.gzip"
# Line kinds in their order: header, board, suite_version, then per subject a report and its
# cases, then the trailer.
BOARD_KINDS = ("header", "board", "suite_version", "report", "case", "trailer")
