"""Reports as a list shows them, kept by the version of what a list shows of them.

A list page read for the first time since a change (a report issued, superseded, an incident
opened) must still cost little, so the page itself is read as versions only: each report's id,
its envelope row's `xmin` (PostgreSQL gives every updated row version the updating
transaction's id) and whether it has an open incident. Everything else a list shows of a report
is its stored body and list fields, which never change, and its envelope, which only an update
of that row changes: so a report read once under a version is rendered again from what was kept
under it. A report not kept under the version listed is read by id; if its row has changed
since the page was read, the page is read again, so a page never mixes two moments.
Least recently used reports go first past `max_bytes`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from app.domain.reports import ListedView
from app.repositories.reads import ListedVersion

# (public base URL, view, expired): what a rendered report depends on besides its version.
RenderKey = tuple[str, str, bool]


# Compared by identity: a page checks for reports not kept with `is None`, never by value.
@dataclass(slots=True, eq=False)
class KeptReport:
    """A report read under one version, and its renderings."""

    view: ListedView
    size: int
    rendered: dict[RenderKey, bytes] = field(default_factory=dict)


class ReportItems:
    """Listed reports by version, least recently used dropped past `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._kept: OrderedDict[ListedVersion, KeptReport] = OrderedDict()
        self._bytes = 0

    @property
    def enabled(self) -> bool:
        """Whether reports are kept at all (EVALBOOK_REPORT_ITEM_CACHE_BYTES > 0)."""
        return self.max_bytes > 0

    def get(self, version: ListedVersion) -> KeptReport | None:
        """The report kept under this version, if any."""
        kept = self._kept.get(version)
        if kept is not None:
            self._kept.move_to_end(version)
        return kept

    def get_all(self, versions: list[ListedVersion]) -> list[KeptReport | None]:
        """`get` of each version, in order."""
        found = list(map(self._kept.get, versions))
        move = self._kept.move_to_end
        for version, kept in zip(versions, found, strict=True):
            if kept is not None:
                move(version)
        return found

    def put(self, version: ListedVersion, view: ListedView) -> None:
        """Keep a report read under `version` (it replaces nothing: versions do not repeat)."""
        if version in self._kept:
            return
        size = len(view.body) + 256
        self._kept[version] = KeptReport(view, size)
        self._bytes += size
        self._evict()

    def rendered(
        self,
        kept: list[KeptReport],
        base_url: str,
        kind: str,
        now: datetime,
        render: Callable[[ListedView], bytes],
    ) -> list[bytes]:
        """Each kept report rendered as `kind` for `base_url` as of `now` (its `expired` flag),
        rendered now the first time."""
        out = []
        live: RenderKey = (base_url, kind, False)
        expired: RenderKey = (base_url, kind, True)
        for report in kept:
            key = expired if report.view.expires_at <= now else live
            found = report.rendered.get(key)
            if found is None:
                found = report.rendered[key] = render(report.view)
                report.size += len(found)
                self._bytes += len(found)
                self._evict()
            out.append(found)
        return out

    def __len__(self) -> int:
        return len(self._kept)

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._kept:
            _, dropped = self._kept.popitem(last=False)
            self._bytes -= dropped.size
