"""The cases trees of issued reports, kept in memory for proofs (built once, then reused).

A tree is a pure function of an evaluation's stored cases of one check, and those never
change once the evaluation is finished, so a built tree stays valid; each one is checked
against the root the report committed to before it is used.
"""

from __future__ import annotations

import asyncio
import uuid
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.digest import merkle
from app.platform.db import ReadConnection
from app.repositories.case_trees import tree_rows


class TreeMismatch(Exception):
    """The stored cases no longer hash to the root the report committed to."""


@dataclass(frozen=True, slots=True)
class CaseTree:
    """One check's tree: its levels (flat bytes, 32 per node) and the leaf keys in order."""

    levels: tuple[bytes, ...]
    example_ids: tuple[str, ...]  # distinct ids, in byte order
    starts: NDArray[np.int64]  # leaf index of each id's first repeat, then the leaf count
    repeats: NDArray[np.int32]  # each leaf's repeat

    @property
    def size(self) -> int:
        """How many leaves."""
        return int(self.repeats.size)

    def leaf(self, index: int) -> bytes:
        """A leaf hash."""
        return self.levels[0][32 * index : 32 * index + 32]

    def index_of(self, example_id: str, repeat: int) -> int | None:
        """The leaf index of (example id, repeat), or None. Python orders str by code point,
        which is the UTF-8 byte order of the tree."""
        position = bisect_left(self.example_ids, example_id)
        if position == len(self.example_ids) or self.example_ids[position] != example_id:
            return None
        start, end = int(self.starts[position]), int(self.starts[position + 1])
        found = start + int(np.searchsorted(self.repeats[start:end], repeat))
        return found if found < end and int(self.repeats[found]) == repeat else None

    def audit_path(self, index: int) -> list[bytes]:
        """RFC 6962 PATH(index, D[n]), nearest the leaf first."""
        return merkle.audit_path([_Nodes(level) for level in self.levels], index)

    def consistency_proof(self, prefix: int) -> list[bytes]:
        """RFC 6962 PROOF(prefix, D[n]): from the first `prefix` leaves to the whole tree."""
        return merkle.consistency_proof([_Nodes(level) for level in self.levels], prefix)

    def root(self) -> bytes:
        """The tree head."""
        return self.levels[-1] if self.size else merkle.EMPTY_ROOT


class _Nodes(Sequence[bytes]):
    """A level's flat bytes seen as a sequence of 32-byte nodes."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data) // 32

    def __getitem__(self, index: Any) -> Any:
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.data[32 * index : 32 * index + 32]


def build_tree(example_ids: list[str], repeats: list[int], leaves: bytes) -> CaseTree:
    """A tree from the ordered keys and leaf hashes (CPU-bound: run it off the event loop)."""
    levels = [
        leaves,
        *(b"".join(level) for level in merkle.levels(merkle.split_leaves(leaves))[1:]),
    ]
    distinct: list[str] = []
    starts: list[int] = []
    previous = None
    for index, example_id in enumerate(example_ids):
        if example_id != previous:
            distinct.append(example_id)
            starts.append(index)
            previous = example_id
    starts.append(len(example_ids))
    return CaseTree(
        levels=tuple(levels),
        example_ids=tuple(distinct),
        starts=np.asarray(starts, dtype=np.int64),
        repeats=np.asarray(repeats, dtype=np.int32),
    )


MAX_REPORTS = 10_000


class CaseTreeCache:
    """Built trees by (evaluation, check), least recently used first out past `max_leaves`;
    and what the proofs read of each report's body, by (project, report)."""

    def __init__(self, max_leaves: int) -> None:
        self.max_leaves = max_leaves
        self.reports: OrderedDict[tuple[uuid.UUID, uuid.UUID], object] = OrderedDict()
        self._trees: OrderedDict[tuple[uuid.UUID, str], CaseTree] = OrderedDict()
        self._building: dict[tuple[uuid.UUID, str], asyncio.Future[CaseTree]] = {}
        self._leaves = 0

    async def get(
        self,
        reader: ReadConnection,
        evaluation_id: uuid.UUID,
        check_id: str,
        count: int,
        root: bytes,
    ) -> CaseTree:
        """The tree of a check's cases, checked against the committed count and root."""
        key = (evaluation_id, check_id)
        tree = self._trees.get(key)
        if tree is not None:
            self._trees.move_to_end(key)
        else:
            pending = self._building.get(key)
            if pending is None:
                pending = asyncio.get_running_loop().create_future()
                self._building[key] = pending
                try:
                    rows = await tree_rows(reader, evaluation_id, check_id)
                    tree = await asyncio.to_thread(build_tree, *rows)
                except BaseException as exc:
                    pending.set_exception(exc)
                    pending.exception()  # retrieved: waiters get it, nobody else needs to
                    raise
                finally:
                    self._building.pop(key, None)
                pending.set_result(tree)
                self._keep(key, tree)
            else:
                tree = await asyncio.shield(pending)
        if tree.size != count or tree.root() != root:
            raise TreeMismatch(f"the stored cases of {check_id!r} do not match the report's root")
        return tree

    def keep_report(self, key: tuple[uuid.UUID, uuid.UUID], ref: object) -> None:
        """Remember what the proofs read of a report (the oldest out past MAX_REPORTS)."""
        self.reports[key] = ref
        while len(self.reports) > MAX_REPORTS:
            self.reports.popitem(last=False)

    def _keep(self, key: tuple[uuid.UUID, str], tree: CaseTree) -> None:
        if tree.size > self.max_leaves:
            return
        self._trees[key] = tree
        self._leaves += tree.size
        while self._leaves > self.max_leaves:
            _, dropped = self._trees.popitem(last=False)
            self._leaves -= dropped.size
