"""Signing in with a token once, a session cookie after; CSRF tokens for every POST."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from urllib.parse import parse_qs, quote

from fastapi import Request, Response

from app.api.state import state_of
from app.identity.auth import Principal
from app.platform.db import reading
from app.services import web_sessions

SESSION_COOKIE = "evalbook_session"
SIGNIN_COOKIE = "evalbook_signin"
MAX_FORM_BYTES = 16 * 1024


class SignInRequired(Exception):
    """No live session: the page redirects to the sign-in form."""


class BadForm(Exception):
    """A POST without the right CSRF token, or an unreadable form."""


@dataclass(frozen=True)
class WebPrincipal:
    """The signed-in token, and the CSRF token its forms carry."""

    principal: Principal
    csrf: str


def is_secure(request: Request) -> bool:
    """Cookies are Secure when the page was reached over https (directly or via a proxy)."""
    settings = state_of(request.app).settings
    configured = settings.public_base_url or ""
    return request.url.scheme == "https" or configured.startswith("https://")


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    """An HttpOnly, SameSite=Strict cookie for the whole site."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=is_secure(request),
        path="/",
    )


async def web_principal(request: Request) -> WebPrincipal:
    """The session's principal, or SignInRequired."""
    secret = request.cookies.get(SESSION_COOKIE)
    if not secret:
        raise SignInRequired
    async with reading(state_of(request.app).reader_pool) as connection:
        found = await web_sessions.resolve(connection, secret)
    if found is None:
        raise SignInRequired
    return WebPrincipal(*found)


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form (the pages post nothing else), first value of each field."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        raise BadForm("a form post was expected")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise BadForm("the form is too large")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise BadForm("the form is not UTF-8") from None
    return {key: values[0] for key, values in fields.items()}


def check_csrf(expected: str | None, form: dict[str, str]) -> None:
    """The form's `csrf` field must equal the session's (or sign-in cookie's) token."""
    given = form.get("csrf", "")
    if not expected or not hmac.compare_digest(expected.encode(), given.encode()):
        raise BadForm("the form's CSRF token does not match; reload the page and try again")


def sign_in_location(request: Request) -> str:
    """Where an unauthenticated page request is sent, coming back afterwards."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return "/signin?next=" + quote(target, safe="")
