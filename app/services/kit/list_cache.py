"""Rendered report list pages, kept while nothing they show has changed.

Dashboards, the Reports pages and scripts ask for the same first pages again and again, and a
list page costs the database far more than the report it would have been had it been one. A page
is kept under the project's list stamp (migration 0016: bumped at the commit of every change to
the project's envelopes or incidents), read before the page itself, and is served again only to
a request that reads the same stamp, and only until the first of its reports expires (the
`expired` flag is rendered into it). A page read after a change committed may be kept under the
stamp read before it; it is then newer than its stamp, and the next request, reading the new
stamp, does not find it. Least recently used pages go first past `max_bytes`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime


@dataclass(slots=True)
class _Page:
    stamp: int
    body: bytes
    # When the first report on the page that has not yet expired expires (None: never).
    fresh_until: datetime | None


class ListCache:
    """Rendered list pages by request, each under the stamp it was read at."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._pages: OrderedDict[Hashable, _Page] = OrderedDict()
        self._bytes = 0

    @property
    def enabled(self) -> bool:
        """Whether pages are kept at all (EVALBOOK_LIST_CACHE_BYTES > 0)."""
        return self.max_bytes > 0

    def get(self, key: Hashable, stamp: int, now: datetime) -> bytes | None:
        """The page kept for `key` if it was kept under `stamp` and is still fresh at `now`."""
        page = self._pages.get(key)
        if page is None:
            return None
        if page.stamp != stamp or (page.fresh_until is not None and now >= page.fresh_until):
            self._drop(key)
            return None
        self._pages.move_to_end(key)
        return page.body

    def put(self, key: Hashable, stamp: int, body: bytes, fresh_until: datetime | None) -> None:
        """Keep a page read under `stamp` (a page larger than the whole cache is not kept)."""
        if len(body) > self.max_bytes:
            return
        self._drop(key)
        self._pages[key] = _Page(stamp, body, fresh_until)
        self._bytes += len(body)
        while self._bytes > self.max_bytes:
            self._drop(next(iter(self._pages)))

    def __len__(self) -> int:
        return len(self._pages)

    def _drop(self, key: Hashable) -> None:
        page = self._pages.pop(key, None)
        if page is not None:
            self._bytes -= len(page.body)
