"""Signing in to the Reports pages as a browser would (forms, CSRF), for the tests of any
package that reads them."""

from __future__ import annotations

import re

import httpx

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, html[:500]
    return match.group(1)


async def sign_in(
    browser: httpx.AsyncClient, token: str, next_path: str = "/reports"
) -> httpx.Response:
    """Fill the sign-in form as a browser would."""
    form = await browser.get("/signin", params={"next": next_path})
    assert form.status_code == 200
    return await browser.post(
        "/signin",
        content=httpx.QueryParams(
            {"csrf": csrf_of(form.text), "next": next_path, "token": token}
        ).__str__(),
        headers=FORM,
    )
