"""The Reports pages (HTML): sign-in, the reports list, one report, one subject."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import hash_secret
from app.db import get_session
from app.errors import Forbidden, ProblemError
from app.repositories import reads
from app.repositories import web_sessions as session_repo
from app.routers.bundles import stream_bundle
from app.routers.deps import object_store, settings_of
from app.services import bundles as bundle_service
from app.services import pages as service
from app.services import reports as report_service
from app.storage import ObjectStoreUnavailable
from app.web import views
from app.web.session import (
    SESSION_COOKIE,
    SIGNIN_COOKIE,
    BadForm,
    SignInRequired,
    WebPrincipal,
    check_csrf,
    new_secret,
    read_form,
    set_cookie,
    sign_in_location,
    web_principal,
)

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).resolve().parent.parent / "web" / "templates")
templates.env.globals.update(when=views.when, words=views.RESULT_WORDS, icons=views.RESULT_ICONS)
Session = Depends(get_session, scope="function")
SESSION_HOURS = 12
RESULTS = ("pass", "fail", "error", "inconclusive")
STATUSES = ("current", "superseded")


def page(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    """Render a template with the signed-in principal, if any."""
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers["Cache-Control"] = "no-store"
    return response


def error_page(
    request: Request, status: int, title: str, detail: str, me: WebPrincipal | None = None
) -> HTMLResponse:
    """An error as a page, with the same status the API would give."""
    return page(request, "error.html", {"title": title, "detail": detail, "me": me}, status)


async def guarded(request: Request, work: Callable[[], Awaitable[Response]]) -> Response:
    """Sign-in redirects, form errors and typed errors become pages."""
    try:
        return await work()
    except SignInRequired:
        return RedirectResponse(sign_in_location(request), status_code=303)
    except BadForm as exc:
        return error_page(request, 400, "The form could not be used", str(exc))
    except ProblemError as exc:
        return error_page(request, exc.status, exc.title, exc.detail)
    except ObjectStoreUnavailable:
        return error_page(request, 503, "Service unavailable", "the object store is unavailable")


async def reader(request: Request) -> WebPrincipal:
    """A signed-in principal allowed to read reports."""
    me = await web_principal(request)
    if not me.principal.has("report.read"):
        raise Forbidden("this token lacks the permission report.read")
    return me


def safe_next(target: str | None) -> str:
    """Only same-site paths are followed after sign-in."""
    if target and target.startswith("/") and not target.startswith("//"):
        return target
    return "/reports"


@router.get("/")
async def home() -> RedirectResponse:
    """The reports list."""
    return RedirectResponse("/reports", status_code=303)


@router.get("/signin")
async def signin_form(request: Request, next: str | None = None) -> Response:
    """Ask for a token once; the form carries a sign-in CSRF token bound to a cookie."""
    csrf = new_secret()
    response = page(request, "signin.html", {"csrf": csrf, "next": safe_next(next), "me": None})
    set_cookie(request, response, SIGNIN_COOKIE, csrf, 600)
    return response


@router.post("/signin")
async def signin(request: Request, session: AsyncSession = Session) -> Response:
    """Check the token, open a session, set its cookie, go where the user was going."""

    async def work() -> Response:
        form = await read_form(request)
        check_csrf(request.cookies.get(SIGNIN_COOKIE), form)
        async with request.app.state.reader_pool.acquire() as connection:
            row = await reads.principal_row(connection, hash_secret(form.get("token", "").strip()))
        if row is None:
            csrf = new_secret()
            response = page(
                request,
                "signin.html",
                {
                    "csrf": csrf,
                    "next": safe_next(form.get("next")),
                    "error": "That token is not valid (unknown or revoked).",
                    "me": None,
                },
                401,
            )
            set_cookie(request, response, SIGNIN_COOKIE, csrf, 600)
            return response
        secret = new_secret()
        expires = datetime.now(UTC) + timedelta(hours=SESSION_HOURS)
        await session_repo.create(session, hash_secret(secret), row["id"], new_secret(), expires)
        redirect = RedirectResponse(safe_next(form.get("next")), status_code=303)
        set_cookie(request, redirect, SESSION_COOKIE, secret, SESSION_HOURS * 3600)
        redirect.delete_cookie(SIGNIN_COOKIE, path="/")
        return redirect

    return await guarded(request, work)


@router.post("/signout")
async def signout(request: Request, session: AsyncSession = Session) -> Response:
    """End the session."""

    async def work() -> Response:
        me = await web_principal(request)
        check_csrf(me.csrf, await read_form(request))
        await session_repo.end(
            session, hash_secret(request.cookies[SESSION_COOKIE]), datetime.now(UTC)
        )
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    return await guarded(request, work)


def _choice(value: str | None, allowed: tuple[str, ...], name: str) -> str | None:
    if not value:
        return None
    if value not in allowed:
        raise BadForm(f"{name} must be one of {', '.join(allowed)}")
    return value


@router.get("/reports")
async def reports_page(request: Request, session: AsyncSession = Session) -> Response:
    """The project's reports, newest first, filtered, a page at a time."""

    async def work() -> Response:
        me = await reader(request)
        query = request.query_params
        filters = {
            "subject_digest": query.get("subject_digest") or None,
            "suite": query.get("suite") or None,
            "result": _choice(query.get("result"), RESULTS, "result"),
            "status": _choice(query.get("status"), STATUSES, "status"),
        }
        rows, following = await service.report_list(
            session, me.principal, cursor=query.get("cursor") or None, **filters
        )
        next_query = None
        if following:
            kept = {k: v for k, v in filters.items() if v}
            next_query = "&".join([*(f"{k}={v}" for k, v in kept.items()), f"cursor={following}"])
        return page(
            request,
            "reports.html",
            {"me": me, "rows": rows, "filters": filters, "next_query": next_query},
        )

    return await guarded(request, work)


async def _report_response(
    request: Request,
    session: AsyncSession,
    me: WebPrincipal,
    report_id: uuid.UUID,
    **extra: Any,
) -> Response:
    detail = await service.report_page(
        session, me.principal, report_id, settings_of(request).public_base_url
    )
    return page(
        request,
        "report.html",
        {
            "me": me,
            "r": detail.view,
            "supersedes": detail.supersedes,
            "bundles": detail.bundles,
            "can_export": me.principal.has("report.export"),
            "now": datetime.now(UTC),
            **extra,
        },
    )


@router.get("/reports/{report_id}")
async def report_page(
    request: Request, report_id: uuid.UUID, session: AsyncSession = Session
) -> Response:
    """One report: verdict, envelope, subject, checks drawn, digest, verify and export."""

    async def work() -> Response:
        return await _report_response(request, session, await reader(request), report_id)

    return await guarded(request, work)


@router.post("/reports/{report_id}/verify")
async def verify_report(
    request: Request, report_id: uuid.UUID, session: AsyncSession = Session
) -> Response:
    """Re-hash the stored body (as the API's verify) and show the answer on the page."""

    async def work() -> Response:
        me = await reader(request)
        check_csrf(me.csrf, await read_form(request))
        answer = await report_service.verify(session, me.principal, report_id)
        return await _report_response(request, session, me, report_id, verified=answer)

    return await guarded(request, work)


@router.post("/reports/{report_id}/export")
async def export_bundle(
    request: Request, report_id: uuid.UUID, session: AsyncSession = Session
) -> Response:
    """Build a bundle (report.export) and offer its download."""

    async def work() -> Response:
        me = await reader(request)
        check_csrf(me.csrf, await read_form(request))
        if not me.principal.has("report.export"):
            raise Forbidden("this token lacks the permission report.export")
        record = await bundle_service.export(
            session,
            me.principal,
            report_id,
            store=object_store(request),
            janitor=request.app.state.upload_janitor,
            settings=settings_of(request),
        )
        return await _report_response(request, session, me, report_id, exported=record)

    return await guarded(request, work)


@router.get("/bundles/{bundle_id}/download")
async def download_bundle(
    request: Request, bundle_id: uuid.UUID, session: AsyncSession = Session
) -> Response:
    """A bundle's bytes (report.export, and dataset.read_body when it holds bodies)."""

    async def work() -> Response:
        me = await reader(request)
        if not me.principal.has("report.export"):
            raise Forbidden("this token lacks the permission report.export")
        bundle, chunks = await bundle_service.content(
            session, me.principal, bundle_id, object_store(request)
        )
        return await stream_bundle(bundle, chunks)

    return await guarded(request, work)


@router.get("/subjects/{digest}")
async def subject_page(request: Request, digest: str, session: AsyncSession = Session) -> Response:
    """What forSubject says about a subject, and its superseded history."""

    async def work() -> Response:
        me = await reader(request)
        current, history = await service.subject_page(session, me.principal, digest)
        now = datetime.now(UTC)
        return page(
            request,
            "subject.html",
            {
                "me": me,
                "digest": digest,
                "current": [r for r in current if not r.expired],
                "expired": [r for r in current if r.expired],
                "history": history,
                "now": now,
            },
        )

    return await guarded(request, work)
