"""The examples whose measure changed most between two reports (docs/changes.md, measures):
for each measure check in both, the top 20 by absolute change of the example's mean over its
repeats."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from app.aggregation import diff as calc
from app.aggregation.inputs import DatasetIndex
from app.platform.db import ReadConnection
from app.repositories import case_columns
from app.repositories.case_columns import measure_rows
from app.services.diff_checks import Side


def _means(data: memoryview, examples: int) -> np.ndarray:
    rows = measure_rows(data)
    return calc.example_means(rows["position"].astype(np.int32), rows["score"], examples)


def measure_checks_in_both(after: Side, before: Side) -> list[dict[str, Any]]:
    """The measure checks of `after` that `before` has too, measuring the same."""
    found = []
    for check_id, definition in after.definitions.items():
        other = before.definitions.get(check_id)
        measure = definition.get("measure")
        if measure is not None and other is not None and other.get("measure") == measure:
            found.append(definition)
    return found


async def measure_changes(
    connection: ReadConnection,
    sides: tuple[Side, Side],
    datasets: tuple[dict[str, DatasetIndex], dict[str, DatasetIndex]],
) -> list[dict[str, Any]]:
    """Per measure check in both reports, the examples whose measure changed most."""
    after, before = sides
    answers = []
    for definition in measure_checks_in_both(after, before):
        measure = definition["measure"]
        of = measure["of"]
        after_set, before_set = datasets[1].get(of), datasets[0].get(of)
        if after_set is None or before_set is None:
            continue
        values = []
        for side, dataset in ((before, before_set), (after, after_set)):
            data = await case_columns.copy_measure(
                connection, side.evaluation_id, of, measure["name"]
            )
            values.append(await asyncio.to_thread(_means, data, dataset.size))
        union, before_at, after_at = calc.union_of(
            np.array(before_set.ids, dtype=np.str_), np.array(after_set.ids, dtype=np.str_)
        )
        moves = calc.largest_measure_changes(values[0], values[1], before_at, after_at)
        answers.append(
            {
                "check_id": definition["check_id"],
                "measure": measure,
                "better": definition["aggregation"].get("better", "higher"),
                "largest_changes": [
                    {
                        "example_id": str(union[at]),
                        "before": was,
                        "after": now,
                        "change": now - was,
                    }
                    for at, was, now in moves
                ],
            }
        )
    return answers
