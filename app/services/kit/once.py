"""Values computed once and kept: the last few, by key, for inputs that never change (two
immutable reports always diff the same way), with one computation of a key at a time."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ComputedOnce(Generic[K, V]):
    """The last `capacity` values computed, least recently used dropped first."""

    def __init__(self, capacity: int = 8) -> None:
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()
        self._locks: dict[K, asyncio.Lock] = {}

    def get(self, key: K) -> V | None:
        """A kept value, or None."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def keep(self, key: K, value: V) -> None:
        """Keep a value, dropping the least recently used beyond capacity."""
        self._items[key] = value
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def lock(self, key: K) -> asyncio.Lock:
        """One computation of a key at a time: a second request waits for the first."""
        if len(self._locks) > 4 * self.capacity:
            self._locks = {k: v for k, v in self._locks.items() if v.locked()}
        return self._locks.setdefault(key, asyncio.Lock())
