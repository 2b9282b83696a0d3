"""Report list pages: read whole, read as versions (app/services/kit/report_items.py) or kept
whole under the project's list stamp (app/services/kit/list_cache.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import orjson

from app.digest.canonical import timestamp
from app.domain.reports import ListedView, ReportFilters
from app.identity.auth import Principal
from app.platform.db import ReadConnection
from app.repositories import reads
from app.services.kit.cursors import decode_cursor, split_page
from app.services.kit.list_cache import ListCache
from app.services.kit.report_items import KeptReport, ReportItems
from app.services.reports import envelope, join_representations, representation


def _issued(row: ListedView) -> tuple[datetime, uuid.UUID]:
    return row.issued_at, row.id


async def report_page(
    reader: ReadConnection,
    principal: Principal,
    filters: ReportFilters,
    *,
    limit: int,
    cursor: str | None,
    bodies: bool = True,
) -> tuple[list[ListedView], str | None]:
    """A page of reports with their envelopes, newest first, and the next page's cursor."""
    rows = await reads.report_list(
        reader,
        principal.project_id,
        filters,
        None if cursor is None else decode_cursor(cursor),
        limit + 1,
        bodies,
    )
    return split_page(rows, limit, _issued)


async def list_reports(
    reader: ReadConnection,
    principal: Principal,
    filters: ReportFilters,
    *,
    public_base_url: str,
    limit: int,
    cursor: str | None,
    view: str = "full",
    cache: ListCache | None = None,
    items: ReportItems | None = None,
) -> bytes:
    """A page of reports, newest first, with the cursor of the next page: full
    representations, or with `view="summary"` each report's list fields and envelope without
    its body. With a `cache`, a page rendered under the project's current list stamp is served
    again (app/services/kit/list_cache.py); with `items`, a page read anew renders the reports kept
    under their versions (app/services/kit/report_items.py)."""
    if cache is None or not cache.enabled:
        body, _ = await render_list(
            reader,
            principal,
            public_base_url,
            filters,
            limit,
            cursor,
            view,
            datetime.now(UTC),
            items,
        )
        return body
    # The stamp is read first: a page read after it can only be as new or newer.
    stamp = await reads.list_stamp(reader, principal.project_id)
    now = datetime.now(UTC)
    key = (principal.project_id, public_base_url, filters, limit, cursor, view)
    kept = cache.get(key, stamp, now)
    if kept is not None:
        return kept
    body, fresh_until = await render_list(
        reader, principal, public_base_url, filters, limit, cursor, view, now, items
    )
    cache.put(key, stamp, body, fresh_until)
    return body


async def render_list(
    reader: ReadConnection,
    principal: Principal,
    public_base_url: str,
    filters: ReportFilters,
    limit: int,
    cursor: str | None,
    view: str,
    now: datetime,
    items: ReportItems | None = None,
) -> tuple[bytes, datetime | None]:
    """A list page rendered as of `now`, and when the first of its reports not yet expired
    expires (its `expired` flag changes then). With `items`, the page is read as versions and
    its reports rendered from those kept (app/services/kit/report_items.py)."""
    found = None
    if items is not None and items.enabled:
        found = await _kept_page(reader, principal, filters, limit, cursor, items)
    if found is None:
        page, next_cursor = await report_page(
            reader,
            principal,
            filters,
            limit=limit,
            cursor=cursor,
            bodies=view == "full",
        )
        rendered = [_render(v, view, public_base_url, now) for v in page]
    else:
        kept, next_cursor = found
        page = [report.view for report in kept]
        assert items is not None
        rendered = items.rendered(
            kept, public_base_url, view, now, lambda v: _render(v, view, public_base_url, now)
        )
    expiring = [v.expires_at for v in page if v.expires_at > now]
    return join_representations(rendered, next_cursor=next_cursor), min(expiring, default=None)


def _render(view: ListedView, kind: str, public_base_url: str, now: datetime) -> bytes:
    if kind == "summary":
        return summary(view, public_base_url, now)
    return representation(view, public_base_url, now)


# A page whose reports changed while they were read is read again, at most this often, before
# it is read whole in one statement.
_KEPT_PAGE_TRIES = 3


async def _kept_page(
    reader: ReadConnection,
    principal: Principal,
    filters: ReportFilters,
    limit: int,
    cursor: str | None,
    items: ReportItems,
) -> tuple[list[KeptReport], str | None] | None:
    """A page as the reports kept under the versions listed (those not kept read by id), and
    its next cursor; None when no read of it held still (or the cache cannot hold a page)."""
    after = None if cursor is None else decode_cursor(cursor)
    for _ in range(_KEPT_PAGE_TRIES):
        versions = await reads.report_list_versions(
            reader, principal.project_id, filters, after, limit + 1
        )
        kept = items.get_all(versions)
        if None in kept:
            missing = [
                reads.version_report_id(version)
                for version, found in zip(versions, kept, strict=True)
                if found is None
            ]
            for view, xmin in await reads.listed_by_id(reader, principal.project_id, missing):
                items.put(reads.version_of(view.id, xmin, view.has_open_incident), view)
            kept = items.get_all(versions)
        if None not in kept:
            return split_page(kept, limit, _kept_position)  # type: ignore[arg-type]
    return None


def _kept_position(report: KeptReport) -> tuple[datetime, uuid.UUID]:
    return report.view.issued_at, report.view.id


def summary(view: ListedView, public_base_url: str, now: datetime) -> bytes:
    """A report in a summary list: its id, digest, list fields and envelope, no body."""
    return orjson.dumps(
        {
            "report_id": str(view.id),
            "digest": view.digest,
            "issued_at": timestamp(view.issued_at),
            "result": view.result,
            "subject_digest": view.subject_digest,
            "mode": view.mode,
            "valid_until": timestamp(view.valid_until),
            "envelope": envelope(view, public_base_url, now),
        }
    )
