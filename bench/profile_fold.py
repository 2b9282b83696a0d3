"""Keep a py-spy profile beside the benchmarks: from `py-spy record -f raw` output, the stacks
that pass through one frame (e.g. `export (app/services/bundles.py`), cut to start at it,
summed, gzip-compressed as folded stacks (flamegraph.pl and speedscope read them), and a
table of the service's own functions by share of those samples.

    python -m bench.profile_fold RAW 'export (app/services/bundles.py' OUT.folded.gz
"""

from __future__ import annotations

import argparse
import collections
import gzip
from pathlib import Path


def fold(raw: Path, through: str) -> collections.Counter[str]:
    """The stacks through `through`, from that frame down, with their sample counts."""
    folded: collections.Counter[str] = collections.Counter()
    for text in raw.read_text().splitlines():
        stack, _, count = text.rpartition(" ")
        frames = stack.split(";")
        starts = [i for i, frame in enumerate(frames) if frame.startswith(through)]
        if starts:
            folded[";".join(frames[starts[0] :])] += int(count)
    return folded


def shares(folded: collections.Counter[str]) -> list[tuple[float, str]]:
    """Each function of `app/` by the share of samples whose stack holds it."""
    total = sum(folded.values()) or 1
    inclusive: collections.Counter[str] = collections.Counter()
    for stack, count in folded.items():
        names = {frame.split(":")[0] + ")" for frame in stack.split(";") if " (app/" in frame}
        for name in names:
            inclusive[name] += count
    return [(count / total, name) for name, count in inclusive.most_common(25)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("raw", type=Path)
    parser.add_argument("through")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    folded = fold(args.raw, args.through)
    lines = "".join(f"{stack} {count}\n" for stack, count in sorted(folded.items()))
    args.out.write_bytes(gzip.compress(lines.encode(), mtime=0))
    print(f"{sum(folded.values())} samples through {args.through!r}")
    for share, name in shares(folded):
        print(f"{share:6.1%}  {name}")


if __name__ == "__main__":
    main()
