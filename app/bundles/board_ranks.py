"""A board recomputed from a board bundle's cases (docs/boards.md, "Proof"): each report's
per-example values from its case records, every pair's counts and raw p from those, and from
the body's own p-values Holm's correction, the decisions, the ranks and rank intervals and the
top group. The Node verifier (verify-bundle.mjs) does the same with its own arithmetic, so the
p-values are compared within P_TOLERANCE; every decision after them is compared exactly."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.aggregation.boards import Entrant, holm, rank_board
from app.aggregation.rounding import r12
from app.bundles.results import Finding, Proven, failure
from app.domain.vocabulary import PASS_FAIL_METHODS

# Two computations of one p-value (scipy's, the Node verifier's continued fraction) agree to
# this; a p-value moved further than this from what the cases give is refused.
P_ABSOLUTE, P_RELATIVE = 1e-9, 1e-7


def close(a: Any, b: Any) -> bool:
    """Whether two reported numbers agree within P_TOLERANCE (both numbers)."""
    if type(a) not in (int, float) or type(b) not in (int, float):
        return False
    return bool(abs(a - b) <= P_ABSOLUTE + P_RELATIVE * max(abs(a), abs(b)))


@dataclass
class ExampleValues:
    """One report's check, read case by case in case order: its executed examples' values."""

    method: str
    repeats: int
    examples: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    _current: str | None = None
    _cells: dict[int, tuple[str, Any]] = field(default_factory=dict)

    def add(self, record: dict[str, Any]) -> None:
        """One case record (records arrive in case order: example id, then repeat)."""
        if record["example_id"] != self._current:
            self._close()
            self._current = record["example_id"]
        self._cells[record["repeat"]] = (record["status"], record["score"])

    def _close(self) -> None:
        cells, self._cells = self._cells, {}
        if self._current is None or len(cells) != self.repeats:
            return
        if any(r not in cells or cells[r][0] not in ("pass", "fail") for r in range(self.repeats)):
            return
        if self.method in PASS_FAIL_METHODS:
            value = sum(1.0 for status, _ in cells.values() if status == "pass") / self.repeats
        else:
            scores = [score for _, score in cells.values()]
            if any(type(s) not in (int, float) for s in scores):
                return
            value = float(np.mean(scores)) if self.method == "mean" else float(min(scores))
        self.examples.append(self._current)
        self.values.append(value)

    def finish(self) -> None:
        """The last example read."""
        self._close()
        self._current = None


@dataclass(frozen=True)
class Subject:
    """A board subject as the bundle proves it: its report's score and its values."""

    subject: str
    report_id: str
    score: float | None
    values: ExampleValues


def settle_ranks(
    line_no: int, body: dict[str, Any], subjects: Sequence[Subject], test: str
) -> Iterator[Finding]:
    """Every pair, the correction, the decisions, the ranks and the top group against the body."""
    entrants = [
        Entrant(
            s.subject,
            s.report_id,
            s.score,
            s.values.examples,
            np.array(s.values.values, dtype=float),
        )
        for s in subjects
    ]
    board = rank_board(entrants, test, float(body["alpha"]))  # type: ignore[arg-type]
    ranked = [p.entrant.subject for p in board.placed]
    excluded = [e.subject for e, _ in board.excluded]
    if [e["subject"] for e in body["subjects"]] != ranked or [
        e["subject"] for e in body["excluded"]
    ] != excluded:
        yield failure(line_no, "ranks", "the subjects ranked and excluded, in order", ranked, None)
        return
    pairs = body["pairs"]
    if len(pairs) != len(board.pairs):
        yield failure(line_no, "pairs", "the number of pairs", len(board.pairs), len(pairs))
        return
    yield from _settle_pairs(line_no, pairs, board.pairs)
    better = yield from _settle_decisions(line_no, body, pairs, ranked)
    if better is None:
        return
    yield from _settle_places(line_no, body, better)


def _settle_pairs(
    line_no: int, stated: list[dict[str, Any]], mine: Sequence[Any]
) -> Iterator[Finding]:
    for pair, computed in zip(stated, mine, strict=True):
        name = f"pair {computed.first} / {computed.second}"
        if pair["subjects"] != [computed.first, computed.second]:
            yield failure(line_no, "pairs", f"{name}: the pair's subjects", None, pair["subjects"])
            continue
        counts = (pair["n"], pair.get("b"), pair.get("c"))
        if counts != (computed.n, computed.b, computed.c):
            what = f"{name}: n, b, c from the cases"
            yield failure(line_no, "pairs", what, (computed.n, computed.b, computed.c), counts)
            continue
        if computed.mean_difference is not None and not close(
            pair.get("mean_difference"), computed.mean_difference
        ):
            what = f"{name}: the mean difference from the cases"
            yield failure(line_no, "pairs", what, computed.mean_difference, pair["mean_difference"])
            continue
        if not close(pair["p_value"], computed.p_value):
            what = f"{name}: the p-value from the cases"
            yield failure(line_no, "pairs", what, computed.p_value, pair["p_value"])
            continue
        yield Proven("pairs")


def _settle_decisions(
    line_no: int, body: dict[str, Any], pairs: list[dict[str, Any]], ranked: list[str]
) -> Generator[Finding, None, set[tuple[int, int]] | None]:
    """Holm over the body's p-values and each pair's decision; the better-than relation
    (index pairs) once every adjusted p and decision agrees, else None."""
    raw = np.array([float(p["p_value"]) for p in pairs])
    adjusted = [r12(float(x)) for x in holm(raw)] if len(raw) else []
    index = {subject: i for i, subject in enumerate(ranked)}
    better: set[tuple[int, int]] = set()
    agreed = True
    for pair, mine in zip(pairs, adjusted, strict=True):
        first, second = pair["subjects"]
        if not close(pair["p_adjusted"], mine):
            yield failure(
                line_no, "pairs", f"{first} / {second}: Holm's adjusted p", mine, pair["p_adjusted"]
            )
            agreed = False
            continue
        ahead = pair["c"] > pair["b"] if "b" in pair else pair["mean_difference"] > 0
        winner = None
        if pair["p_adjusted"] < body["alpha"]:
            top, bottom = (second, first) if ahead else (first, second)
            better.add((index[top], index[bottom]))
            winner = top
        if pair["better"] != winner:
            yield failure(
                line_no, "pairs", f"{first} / {second}: which is better", winner, pair["better"]
            )
            agreed = False
    return better if agreed else None


def _settle_places(
    line_no: int, body: dict[str, Any], better: set[tuple[int, int]]
) -> Iterator[Finding]:
    placed = body["subjects"]
    k = len(placed)
    scores = [e["score"] or 0.0 for e in placed]
    for i, entry in enumerate(placed):
        rank = 1 + sum(1 for s in scores if s > scores[i])
        interval = [
            1 + sum(1 for j in range(k) if (j, i) in better),
            k - sum(1 for j in range(k) if (i, j) in better),
        ]
        if (entry["rank"], entry["rank_interval"]) != (rank, interval):
            what = f"{entry['subject']}: rank and rank interval"
            yield failure(
                line_no, "ranks", what, (rank, interval), (entry["rank"], entry["rank_interval"])
            )
            continue
        yield Proven("ranks")
    top = [e["subject"] for i, e in enumerate(placed) if k and (0, i) not in better]
    if body["top_group"] != top:
        yield failure(line_no, "ranks", "the top group", top, body["top_group"])
