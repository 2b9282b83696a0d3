"""The board's statistics at the sizes of issue 54, in process: 200 subjects x 10,000 examples
(19,900 pairs, McNemar exact and the paired t-test) and 20 subjects x 1,000,000 examples,
each against its floor in the same run, the floor being the one matrix product any pairwise
count needs (executed x executed^T over the same matrix), alternated over rounds. Prints times,
peak RSS growth and the ratio. Targets: < 5 s and < 1 GB; < 10 s.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np
import psutil

from app.aggregation.boards import Entrant, PairedTest, rank_board
from bench.common import PeakRss, load_note, table


def field(subjects: int, examples: int, test: PairedTest, seed: int = 1) -> list[Entrant]:
    """Subjects with pass rates spread over 0.6-0.9 (or normal scores), one dataset."""
    rng = np.random.default_rng(seed)
    # One array of ids, as the service takes each entrant's executed ids from the dataset's.
    ids = np.asarray([f"ex{n:07d}" for n in range(examples)])
    rates = np.linspace(0.6, 0.9, subjects)
    out = []
    for s in range(subjects):
        if test == "mcnemar_exact":
            values = (rng.random(examples) < rates[s]).astype(float)
        else:
            values = rng.normal(rates[s], 0.2, examples)
        out.append(Entrant(f"sha1:{s:040x}", f"r{s}", float(values.mean()), ids, values))
    return out


def timed(run: object, *args: object) -> tuple[float, float]:
    """(seconds, peak RSS growth in MB, sampled every 10 ms) of one call."""
    gc.collect()
    with PeakRss(psutil.Process(), interval=0.01) as rss:
        started = time.perf_counter()
        run(*args)  # type: ignore[operator]
        seconds = time.perf_counter() - started
    return seconds, rss.growth_mb


def floor(entrants: list[Entrant]) -> None:
    """The matrix product every pairwise count needs."""
    matrix = np.vstack([e.values for e in entrants])
    matrix @ matrix.T


def main() -> None:
    """Time each size against its floor, alternated."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for subjects, examples, test, target in (
        (200, 10_000, "mcnemar_exact", "< 5 s, < 1 GB"),
        (200, 10_000, "paired_t", "< 5 s, < 1 GB"),
        (20, 1_000_000, "mcnemar_exact", "< 10 s"),
    ):
        entrants = field(subjects, examples, test)  # type: ignore[arg-type]
        board, base = [], []
        for round_ in range(args.rounds):
            for side in ("board", "floor")[:: -1 if round_ % 2 else 1]:
                if side == "board":
                    board.append(timed(rank_board, entrants, test, 0.05))
                else:
                    base.append(timed(floor, entrants))
        seconds = [b[0] for b in board]
        rows.append(
            [
                f"{subjects} x {examples:,}, {test}",
                " ".join(f"{s:.2f}" for s in seconds) + " s",
                f"{max(b[1] for b in board):.0f} MB",
                " ".join(f"{f[0]:.2f}" for f in base) + " s",
                f"{statistics.median(seconds) / statistics.median(f[0] for f in base):.1f}",
                target,
            ]
        )
    headers = [
        "board",
        "time per round",
        "peak RSS growth",
        "floor per round",
        "board / floor",
        "target",
    ]
    print(table(headers, rows))
    print(load_note())


if __name__ == "__main__":
    main()
