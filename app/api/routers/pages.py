"""The Reports pages (HTML): sign-in, the reports list, one report, one subject."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from starlette.exceptions import HTTPException

from app.api.deps import CaseTrees, Incidents, PublicURL, Reader, ReportReads, Session, State, Store
from app.api.routers.body import problem_errors, validation_failed
from app.api.routers.bundles import download_response
from app.api.routers.route import EdgeRoute, Handler
from app.api.state import state_of
from app.api.web import views
from app.api.web.render import error_page, page
from app.api.web.session import (
    SESSION_COOKIE,
    SIGNIN_COOKIE,
    BadForm,
    SignInRequired,
    WebPrincipal,
    check_csrf,
    read_form,
    set_cookie,
    sign_in_location,
    web_principal,
)
from app.digest.signing import ENVELOPE_MEDIA_TYPE
from app.domain.errors import Forbidden, ProblemError
from app.domain.reports import ReportFilters
from app.schemas.common import Text
from app.services import bundles as bundle_service
from app.services import case_proofs as case_proof_service
from app.services import drilldown, transparency, web_sessions
from app.services import pages as service
from app.services import reports as report_service
from app.services import signing as signing_service
from app.services.incidents import IncidentRecorder

RESULTS = ("pass", "fail", "error", "inconclusive")
STATUSES = ("current", "superseded")
Filter = Annotated[Text | None, Query(max_length=300)]


# The pages load nothing but their own stylesheet and never run a script: a policy that says
# so stops injected markup from loading or sending anything, and no page may be framed
# (`nosniff`, which every response carries, is added by app/api/edge.py).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


class PageRoute(EdgeRoute):
    """A page's route: every failure is a page (or the sign-in redirect), rendered after the
    request's transaction was rolled back, never inside the endpoint."""

    passed_through = (*EdgeRoute.passed_through, SignInRequired, BadForm)

    def get_route_handler(self) -> Handler:
        """The edge handler, with failures rendered as pages."""
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            response = await render(request)
            response.headers.update(SECURITY_HEADERS)
            return response

        async def render(request: Request) -> Response:
            try:
                return await handle(request)
            except SignInRequired:
                return RedirectResponse(sign_in_location(request), status_code=303)
            except BadForm as exc:
                return error_page(request, 400, "The form could not be used", str(exc))
            except RequestValidationError as exc:
                failed = validation_failed(problem_errors(exc.errors()))
                return error_page(request, 422, "Validation failed", failed.detail)
            except ProblemError as exc:
                return error_page(request, exc.status, exc.title, exc.detail, exc.headers)
            except HTTPException as exc:
                return error_page(request, exc.status_code, str(exc.detail), str(exc.detail))

        return handler


router = APIRouter(include_in_schema=False, route_class=PageRoute)


async def reader(request: Request) -> WebPrincipal:
    """A signed-in principal allowed to read reports."""
    me = await web_principal(request)
    if not me.principal.has("report.read"):
        raise Forbidden("this token lacks the permission report.read")
    return me


# A signed-in reader, resolved as a dependency. An endpoint that also takes a connection
# declares this first: the sign-in is looked up on a connection of the same read pool, given
# back before the endpoint's own is taken (decision 0019).
WebReader = Annotated[WebPrincipal, Depends(reader)]


async def exporter(request: Request) -> WebPrincipal:
    """A signed-in principal allowed to export bundles."""
    me = await reader(request)
    if not me.principal.has("report.export"):
        raise Forbidden("this token lacks the permission report.export")
    return me


def safe_next(target: str | None) -> str:
    """Only same-site paths are followed after sign-in."""
    if target and target.startswith("/") and not target.startswith("//"):
        return target
    return "/reports"


def _signin_form(
    request: Request, next_path: str | None, status: int = 200, **extra: Any
) -> Response:
    csrf = web_sessions.new_secret()
    context = {"csrf": csrf, "next": safe_next(next_path), "me": None, **extra}
    response = page(request, "signin.html", context, status)
    set_cookie(request, response, SIGNIN_COOKIE, csrf, 600)
    return response


@router.get("/")
async def home() -> RedirectResponse:
    """The reports list."""
    return RedirectResponse("/reports", status_code=303)


@router.get("/signin")
async def signin_form(request: Request, next: Filter = None) -> Response:
    """Ask for a token once; the form carries a sign-in CSRF token bound to a cookie."""
    return _signin_form(request, next)


@router.post("/signin")
async def signin(request: Request, session: Session, connection: Reader) -> Response:
    """Check the token, open a session, set its cookie, go where the user was going."""
    form = await read_form(request)
    check_csrf(request.cookies.get(SIGNIN_COOKIE), form)
    secret = await web_sessions.sign_in(session, connection, form.get("token", ""))
    if secret is None:
        error = "That token is not valid (unknown or revoked)."
        return _signin_form(request, form.get("next"), 401, error=error)
    redirect = RedirectResponse(safe_next(form.get("next")), status_code=303)
    set_cookie(request, redirect, SESSION_COOKIE, secret, web_sessions.SESSION_HOURS * 3600)
    redirect.delete_cookie(SIGNIN_COOKIE, path="/")
    return redirect


@router.post("/signout")
async def signout(request: Request, session: Session) -> Response:
    """End the session."""
    me = await web_principal(request)
    check_csrf(me.csrf, await read_form(request))
    await web_sessions.sign_out(session, request.cookies[SESSION_COOKIE])
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def _choice(value: str | None, allowed: tuple[str, ...], name: str) -> str | None:
    if not value:
        return None
    if value not in allowed:
        raise BadForm(f"{name} must be one of {', '.join(allowed)}")
    return value


@router.get("/reports")
async def reports_page(
    request: Request,
    me: WebReader,
    reader_connection: ReportReads,
    subject_digest: Filter = None,
    suite: Filter = None,
    result: Filter = None,
    status: Filter = None,
    subject: Filter = None,
    cursor: Filter = None,
) -> Response:
    """The project's reports, newest first, filtered, a page at a time."""
    if subject and len(subject) > 200:
        raise BadForm("subject is at most 200 characters")
    filters = {
        "subject": subject or None,
        "subject_digest": subject_digest or None,
        "suite": suite or None,
        "result": _choice(result, RESULTS, "result"),
        "status": _choice(status, STATUSES, "status"),
    }
    rows, following = await service.report_list(
        reader_connection, me.principal, ReportFilters(**filters), cursor or None
    )
    next_query = None
    if following:
        kept = {k: v for k, v in filters.items() if v}
        next_query = urlencode({**kept, "cursor": following})
    return page(
        request,
        "reports.html",
        {"me": me, "rows": rows, "filters": filters, "next_query": next_query},
    )


async def _report_response(
    request: Request,
    session: Session,
    me: WebPrincipal,
    report_id: uuid.UUID,
    public_url: str,
    **extra: Any,
) -> Response:
    detail = await service.report_page(session, me.principal, report_id, public_url)
    view = views.report_view(detail.report_id, detail.digest, detail.body, detail.envelope)
    state = state_of(request.app)
    near = await drilldown.neighbours(
        session, me.principal, view.body, detail.supersedes, detail.envelope.get("superseded_by")
    )
    own = await drilldown.own_scores(
        session, me.principal, state.suite_cache, state.diffs, state.reader_pool, report_id, near
    )
    logged = await transparency.log_position(session, state.transparency, report_id)
    return page(
        request,
        "report.html",
        {
            "me": me,
            "r": view,
            "supersedes": detail.supersedes,
            "bundles": detail.bundles,
            "signer": detail.signer,
            "can_export": me.principal.has("report.export"),
            "near": near,
            "own": own,
            "logged": logged,
            "now": datetime.now(UTC),
            **extra,
        },
    )


@router.get("/reports/{report_id}")
async def report_page(
    request: Request, report_id: uuid.UUID, session: Session, public_url: PublicURL
) -> Response:
    """One report: verdict, envelope, subject, checks drawn, digest, verify and export."""
    me = await reader(request)
    return await _report_response(request, session, me, report_id, public_url)


@router.get("/reports/{report_id}/checks/{check_id}/examples/{example_id}")
async def example_cases_page(
    request: Request, report_id: uuid.UUID, check_id: str, example_id: str, session: Session
) -> Response:
    """One example's cases (every repeat) in a check: what a flaky example did."""
    me = await reader(request)
    detail = await service.example_cases_page(
        session, me.principal, report_id, check_id, example_id
    )
    return page(request, "cases.html", {"me": me, "d": detail})


@router.get("/reports/{report_id}/cases/{check_id}/{example_id}/{repeat}/proof")
async def case_proof(
    request: Request,
    report_id: uuid.UUID,
    check_id: str,
    example_id: str,
    repeat: int,
    me: WebReader,
    reader_connection: Reader,
    trees: CaseTrees,
    incidents: Incidents,
) -> Response:
    """One case's record and audit path (the JSON of the case-proof endpoint), to keep."""
    proof = await case_proof_service.case_proof(
        reader_connection,
        me.principal,
        trees,
        report_id,
        check_id,
        example_id,
        repeat,
        baseline=False,
        incidents=incidents,
    )
    filename = f"{report_id}.{check_id}.{example_id}.{repeat}.proof.json"
    return Response(
        content=proof,
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.get("/reports/{report_id}/attestation")
async def report_attestation(request: Request, report_id: uuid.UUID, session: Session) -> Response:
    """The report's signed statement (its DSSE envelope), to keep or check offline."""
    me = await reader(request)
    envelope = await signing_service.report_attestation(session, me.principal, report_id)
    return Response(
        content=envelope,
        media_type=ENVELOPE_MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{report_id}.dsse.json"'},
    )


@router.post("/reports/{report_id}/verify")
async def verify_report(
    request: Request, report_id: uuid.UUID, session: Session, public_url: PublicURL
) -> Response:
    """Re-hash the stored body (as the API's verify) and show the answer on the page."""
    me = await reader(request)
    check_csrf(me.csrf, await read_form(request))
    answer = await report_service.verify(session, me.principal, report_id)
    return await _report_response(request, session, me, report_id, public_url, verified=answer)


@router.post("/reports/{report_id}/export")
async def export_bundle(
    request: Request, report_id: uuid.UUID, session: Session, state: State, public_url: PublicURL
) -> Response:
    """Build a bundle (report.export) and offer its download."""
    me = await exporter(request)
    check_csrf(me.csrf, await read_form(request))
    record = await bundle_service.export(
        session,
        me.principal,
        report_id,
        store=state.object_store,
        janitor=state.upload_janitor,
        settings=state.settings,
        public_url=public_url,
        trees=state.case_trees,
        incidents=IncidentRecorder(state.background_sessionmaker),
        log=state.transparency,
        signer=state.signer,
    )
    return await _report_response(request, session, me, report_id, public_url, exported=record)


@router.get("/bundles/{bundle_id}/download")
async def download_bundle(
    request: Request, bundle_id: uuid.UUID, session: Session, store: Store
) -> Response:
    """A bundle's bytes (report.export, and dataset.read_body when it holds bodies)."""
    me = await exporter(request)
    return download_response(await bundle_service.download(session, me.principal, bundle_id, store))


@router.get("/subjects/{digest}")
async def subject_page(
    request: Request, digest: Text, me: WebReader, reader_connection: ReportReads
) -> Response:
    """What forSubject says about a subject, and its superseded history."""
    current, history = await service.subject_page(reader_connection, me.principal, digest)
    return page(
        request,
        "subject.html",
        {
            "me": me,
            "digest": digest,
            "current": [r for r in current if not r.expired],
            "expired": [r for r in current if r.expired],
            "history": history,
            "now": datetime.now(UTC),
        },
    )
