"""A board's body (docs/boards.md, section 2): what it ranks, how, and each subject's place,
as the canonical JSON object that is digested, signed and logged. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.aggregation.boards import Board, PairResult

SCHEMA_VERSION = "1.0"
CORRECTION = "holm"


@dataclass(frozen=True)
class BoardMeta:
    """What a board is of: its id, the suite version, the check, and when it was made."""

    board_id: str
    suite_ref: dict[str, str]
    check_id: str
    created_at: str


def _pair(pair: PairResult) -> dict[str, Any]:
    counted: dict[str, Any] = (
        {"b": pair.b, "c": pair.c}
        if pair.mean_difference is None
        else {"mean_difference": pair.mean_difference}
    )
    return {
        "subjects": [pair.first, pair.second],
        "n": pair.n,
        **counted,
        "p_value": pair.p_value,
        "p_adjusted": pair.p_adjusted,
        "better": pair.better,
    }


def board_body(board: Board, meta: BoardMeta) -> dict[str, Any]:
    """The body: subjects by score (ties by digest) with their ranks and rank intervals, the
    top group, every pair, the excluded subjects, the methods and what the board is of."""
    return {
        "schema_version": SCHEMA_VERSION,
        "board_id": meta.board_id,
        "suite_ref": meta.suite_ref,
        "check_id": meta.check_id,
        "alpha": board.alpha,
        "methods": {"pairwise": board.test, "correction": CORRECTION},
        "subjects": [
            {
                "subject": placed.entrant.subject,
                "report_id": placed.entrant.report_id,
                "report_digest": placed.entrant.report_digest,
                "score": placed.entrant.score,
                "interval": placed.entrant.interval,
                "rank": placed.rank,
                "rank_interval": list(placed.rank_interval),
            }
            for placed in board.placed
        ],
        "top_group": board.top_group,
        "pairs": [_pair(pair) for pair in board.pairs],
        "excluded": [
            {"subject": entrant.subject, "report_id": entrant.report_id, "reason": reason}
            for entrant, reason in board.excluded
        ],
        "created_at": meta.created_at,
    }
