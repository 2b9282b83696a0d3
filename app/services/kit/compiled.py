"""The cache of compiled suite versions (app/domain/suites.py), which never change."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping

import orjson
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation.inputs import DatasetIndex
from app.domain.suites import CompiledCheck, CompiledSuite
from app.models import ScorerVersion, SuiteVersion
from app.repositories import definitions as repo


class SuiteCache:
    """A bounded LRU of suite versions, stored and compiled, and of the example indexes of the
    dataset versions they use (all never change): a suite version is read once, and a dataset
    version's examples once, however many checks, starts, ingests and finishes name them."""

    def __init__(self, capacity: int = 128, dataset_capacity: int = 32) -> None:
        self.capacity = capacity
        self.dataset_capacity = dataset_capacity
        self._items: OrderedDict[uuid.UUID, tuple[SuiteVersion, CompiledSuite]] = OrderedDict()
        self._datasets: OrderedDict[uuid.UUID, DatasetIndex] = OrderedDict()

    async def dataset(self, session: AsyncSession, dataset_version_id: uuid.UUID) -> DatasetIndex:
        """A dataset version's example ids (byte order) and tags, read on first use."""
        cached = self._datasets.get(dataset_version_id)
        if cached is not None:
            self._datasets.move_to_end(dataset_version_id)
            return cached
        examples = await repo.example_index(session, dataset_version_id)
        index = DatasetIndex(tuple(e for e, _ in examples), tuple(tuple(t) for _, t in examples))
        self._datasets[dataset_version_id] = index
        while len(self._datasets) > self.dataset_capacity:
            self._datasets.popitem(last=False)
        return index

    async def positions(
        self, session: AsyncSession, dataset_version_id: uuid.UUID
    ) -> Mapping[str, int]:
        """Example id -> position (id byte order) in a dataset version, read on first use."""
        return (await self.dataset(session, dataset_version_id)).positions

    def cached(self, suite_version_id: uuid.UUID) -> tuple[SuiteVersion, CompiledSuite] | None:
        """A suite version read before (a copy bound to no session) and its compiled form."""
        cached = self._items.get(suite_version_id)
        if cached is not None:
            self._items.move_to_end(suite_version_id)
        return cached

    async def get(self, session: AsyncSession, suite_version: SuiteVersion) -> CompiledSuite:
        """The compiled form of a suite version, built on first use."""
        cached = self.cached(suite_version.id)
        if cached is not None:
            return cached[1]
        compiled = await compile_suite(session, suite_version, self.positions)
        self._items[suite_version.id] = (_detached(suite_version), compiled)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return compiled


def _detached(suite_version: SuiteVersion) -> SuiteVersion:
    """A copy of a stored suite version's columns that belongs to no session, so that requests
    after this one read it without a query (its columns never change once stored, but for the
    activation's stamp, which no reader of the cache uses)."""
    columns = inspect(SuiteVersion).column_attrs
    return SuiteVersion(**{column.key: getattr(suite_version, column.key) for column in columns})


async def compile_suite(
    session: AsyncSession,
    suite_version: SuiteVersion,
    positions_of: Callable[[AsyncSession, uuid.UUID], Awaitable[Mapping[str, int]]],
) -> CompiledSuite:
    """Resolve each check's dataset version and example positions (from `positions_of`)."""
    content = orjson.loads(suite_version.content)
    checks: dict[str, CompiledCheck] = {}
    for check in content["checks"]:
        if "measure" in check:
            # A measure check has no cases of its own: a case naming it is an unknown check.
            continue
        dataset = await repo.get_dataset(
            session, suite_version.project_id, check["dataset"]["name"], check["dataset"]["version"]
        )
        assert dataset is not None, "a frozen suite version references an existing dataset"
        checks[check["check_id"]] = CompiledCheck(
            check_id=check["check_id"],
            method=check["aggregation"]["method"],
            repeats=check["repeats"],
            scorer_name=check["scorer"]["name"],
            pinned_version=check["scorer"]["version"],
            pinned_digest=check["scorer"]["digest"],
            dataset_version_id=dataset.id,
            example_positions=await positions_of(session, dataset.id),
        )
    return CompiledSuite(suite_version_id=suite_version.id, content=content, checks=checks)


async def suite_of(
    session: AsyncSession, suites: SuiteCache, suite_version_id: uuid.UUID
) -> tuple[SuiteVersion, CompiledSuite]:
    """A stored suite version (an evaluation's always exists) and its compiled form, read
    from the database only the first time."""
    cached = suites.cached(suite_version_id)
    if cached is not None:
        return cached
    suite_version = await repo.get_suite_version_by_id(session, suite_version_id)
    assert suite_version is not None, "an evaluation's suite version exists"
    return suite_version, await suites.get(session, suite_version)


async def compiled_of(
    session: AsyncSession, suites: SuiteCache, suite_version_id: uuid.UUID
) -> CompiledSuite:
    """The compiled suite of a stored suite version."""
    _, compiled = await suite_of(session, suites, suite_version_id)
    return compiled


async def pinned_scorers(
    session: AsyncSession, project_id: uuid.UUID, compiled: CompiledSuite
) -> dict[tuple[str, str], ScorerVersion]:
    """Every version of the suite's scorers, by (name, version): the pinned ones among them."""
    scorers = await repo.scorers_named(session, project_id, compiled.scorer_names)
    return {(scorer.name, scorer.version): scorer for scorer in scorers}
