"""What storing four measures costs PostgreSQL, and whether a compact stored form would save it.

Issue 52 asks ingest with four measures a case within 1.15 x the same cases without. A way
left open was to store less: only the values (`0.0009433,1533,1658.25,233`, 25 bytes on
average here) with the names kept once, instead of the canonical text the leaf commits to
(`{"cost_usd":0.0009433,...}`, 82 bytes). This times PostgreSQL alone on the three forms: one
asyncpg binary COPY of the same million `cases` rows (bench.ingest's cases, bench.measures'
measures) into an empty table shaped as `cases` (`LIKE cases INCLUDING ALL`: its columns,
checks and primary key; one table rather than the hash partitions), the forms alternated over
`--rounds`, and prints each COPY's wall time and the PostgreSQL backend's CPU (from /proc,
so PostgreSQL must run on this machine), each as a ratio to the copy without measures. No
service runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import asyncpg

from app.digest.merkle import measures_text
from app.platform.config import to_plain_url
from app.platform.db import migrate
from bench.common import database_url, load_note, table
from bench.ingest import CHECKS, REPEATS, case_rows, example_ids
from bench.measures import case_measures

FORMS = ("no measures", "canonical text (stored)", "values only (compact)")


def rows_by_form() -> dict[str, list[tuple[object, ...]]]:
    """The million rows, once in each form (built before timing)."""
    plain, _ = case_rows(uuid.uuid4(), "sha256:" + "d" * 64)
    texts = [
        measures_text(case_measures(position, r, c))
        for c in range(CHECKS)
        for position in range(len(example_ids()))
        for r in range(REPEATS)
    ]
    # The canonical texts' numbers in their (sorted) names' order.
    values = [",".join(part.split(":")[1] for part in text[1:-1].split(",")) for text in texts]
    return {
        FORMS[0]: plain,
        FORMS[1]: [(*row[:-1], text) for row, text in zip(plain, texts, strict=True)],
        FORMS[2]: [(*row[:-1], value) for row, value in zip(plain, values, strict=True)],
    }


def backend_cpu(pid: int) -> float:
    """A local PostgreSQL backend's user and system CPU seconds so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


async def timed_copies(url: str, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Each form's (wall, backend CPU) a round; the order turns round every other round."""
    forms = rows_by_form()
    connection = await asyncpg.connect(to_plain_url(url))
    try:
        columns = [
            name
            for (name,) in await connection.fetch(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'cases'::regclass"
                " AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
            )
            if name not in ("created_at", "output_removed_at")
        ]
        pid = await connection.fetchval("SELECT pg_backend_pid()")
        found: dict[str, list[tuple[float, float]]] = {form: [] for form in FORMS}
        for round_ in range(rounds):
            for form in FORMS if round_ % 2 == 0 else tuple(reversed(FORMS)):
                await connection.execute(
                    "DROP TABLE IF EXISTS bench_cases;"
                    " CREATE TABLE bench_cases (LIKE cases INCLUDING ALL)"
                )
                await connection.execute("CHECKPOINT")
                cpu, started = backend_cpu(pid), time.perf_counter()
                async with connection.transaction():
                    await connection.copy_records_to_table(
                        "bench_cases", records=forms[form], columns=columns
                    )
                found[form].append((time.perf_counter() - started, backend_cpu(pid) - cpu))
        await connection.execute("DROP TABLE bench_cases")
        return found
    finally:
        await connection.close()


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    url = database_url()
    migrate(url)
    found = asyncio.run(timed_copies(url, args.rounds))
    base_wall = statistics.median(wall for wall, _ in found[FORMS[0]])
    base_cpu = statistics.median(cpu for _, cpu in found[FORMS[0]])
    rows = []
    for form in FORMS:
        walls = [wall for wall, _ in found[form]]
        cpus = [cpu for _, cpu in found[form]]
        rows.append(
            [
                form,
                " ".join(f"{wall:.2f}" for wall in walls),
                f"{statistics.median(walls):.2f}",
                f"{statistics.median(walls) / base_wall:.3f}",
                " ".join(f"{cpu:.2f}" for cpu in cpus),
                f"{statistics.median(cpus) / base_cpu:.3f}",
            ]
        )
    headers = ["measures", "COPY s a round", "median", "/ none", "backend CPU s", "/ none"]
    print(table(headers, rows))
    print(f"\n1,000,000 rows a COPY, {args.rounds} rounds; {load_note()}")


if __name__ == "__main__":
    main()
