"""The measures finishing reads: for each measure a measure check names, that measure of the
cases of the check it measures, aligned with that check's columns (docs/verdicts.md, section
13)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from app.aggregation.inputs import CaseColumns
from app.platform.db import ReadConnection
from app.repositories import case_columns
from app.repositories.case_columns import CopyFormatError, measure_rows


def measures_named(content: Mapping[str, Any]) -> dict[str, set[str]]:
    """Per scored check, the measures the suite's measure checks read of it."""
    named: dict[str, set[str]] = {}
    for check in content["checks"]:
        measure = check.get("measure")
        if measure is not None:
            named.setdefault(measure["of"], set()).add(measure["name"])
    return named


def aligned_values(data: bytes | bytearray | memoryview, cases: CaseColumns) -> np.ndarray:
    """A measure's values from its binary COPY stream, in the order of `cases` (case order)."""
    rows = measure_rows(data)
    key = (rows["position"].astype(np.int64) << 32) | rows["repeat"].astype(np.int64)
    order = np.argsort(key, kind="stable")
    wanted = (cases.example_index.astype(np.int64) << 32) | cases.repeat.astype(np.int64)
    if key.size != wanted.size or not np.array_equal(key[order], wanted):
        raise CopyFormatError("a measure's cases are not the cases of its check")
    values: np.ndarray = rows["score"][order].astype(np.float64)
    return values


MeasureStreams = dict[tuple[str, str], memoryview]
Read = TypeVar("Read")


async def measure_streams(
    connection: ReadConnection, evaluation_id: uuid.UUID, content: Mapping[str, Any]
) -> MeasureStreams:
    """Each measure the suite's measure checks read, of the cases of the check it measures, as
    its binary COPY stream (read before the checks' columns are, or while they are)."""
    streams: MeasureStreams = {}
    for check_id, names in measures_named(content).items():
        for name in sorted(names):
            streams[check_id, name] = await case_columns.copy_measure(
                connection, evaluation_id, check_id, name
            )
    return streams


async def attach_measures(streams: MeasureStreams, columns: dict[str, CaseColumns]) -> None:
    """Attach to each measured check's columns (in place) its measures' values, aligned."""
    by_check: dict[str, dict[str, np.ndarray]] = {}
    for (check_id, name), data in streams.items():
        cases = columns.get(check_id)
        if cases is None:
            # A check with no case has no columns to attach to.
            continue
        found = by_check.setdefault(check_id, dict(cases.measures))
        found[name] = await asyncio.to_thread(aligned_values, data, cases)
    for check_id, found in by_check.items():
        columns[check_id] = replace(columns[check_id], measures=found)


async def alongside(
    reads: Awaitable[Read], streams: Awaitable[MeasureStreams]
) -> tuple[Read, MeasureStreams]:
    """`reads` (on the read pool) awaited while `streams` reads the measures on the
    transaction's own connection. When `reads` fails, the measures' read is cancelled and
    waited for before the failure goes on: the transaction is then rolled back, and its
    connection must be free for that."""
    measuring = asyncio.ensure_future(streams)
    try:
        read = await reads
    except BaseException:
        measuring.cancel()
        with contextlib.suppress(BaseException):
            await measuring
        raise
    return read, await measuring
