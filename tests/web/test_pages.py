"""The Reports pages over ASGI: sign-in, sessions, CSRF, permissions, verify and export."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text

from tests.bundle_helpers import rich_report
from tests.conftest import Project
from tests.factories import behind_the_triggers, define_suite, start_evaluation
from tests.pages_helpers import FORM, csrf_of, sign_in


async def test_pages_need_a_session_and_the_sign_in_sets_a_strict_cookie(
    project: Project, browser: httpx.AsyncClient, app: FastAPI, db: Any
) -> None:
    redirect = await browser.get("/reports?result=pass")
    assert redirect.status_code == 303
    assert redirect.headers["location"] == "/signin?next=%2Freports%3Fresult%3Dpass"
    bad = await sign_in(browser, "evb_not-a-token")
    assert bad.status_code == 401 and "not valid" in bad.text
    token = await project.token("report.read")
    signed = await sign_in(browser, token, "/reports?result=pass")
    assert signed.status_code == 303 and signed.headers["location"] == "/reports?result=pass"
    cookie = signed.headers["set-cookie"]
    assert "evalbook_session=" in cookie
    for flag in ("HttpOnly", "SameSite=strict", "Secure", "Path=/"):
        assert flag.lower() in cookie.lower()
    assert token not in cookie
    listing = await browser.get("/reports")
    assert listing.status_code == 200 and "<h1>Reports</h1>" in listing.text
    async with db() as session:
        stored = (
            await session.execute(
                text("SELECT count(*) FROM web_sessions WHERE csrf_token IS NOT NULL")
            )
        ).scalar_one()
    assert stored >= 1


async def test_sign_in_and_sign_out_are_protected_against_csrf(
    project: Project, browser: httpx.AsyncClient
) -> None:
    token = await project.token("report.read")
    await browser.get("/signin")
    forged = await browser.post("/signin", content=f"csrf=guess&token={token}", headers=FORM)
    assert forged.status_code == 400 and "CSRF" in forged.text
    assert "evalbook_session" not in forged.headers.get("set-cookie", "")
    await sign_in(browser, token)
    page = await browser.get("/reports")
    refused = await browser.post("/signout", content="csrf=wrong", headers=FORM)
    assert refused.status_code == 400
    assert (await browser.get("/reports")).status_code == 200
    done = await browser.post("/signout", content=f"csrf={csrf_of(page.text)}", headers=FORM)
    assert done.status_code == 303
    assert (await browser.get("/reports")).status_code == 303


@pytest.fixture
async def rich(
    project: Project, client: httpx.AsyncClient, app: FastAPI, db: Any
) -> dict[str, Any]:
    """A rich report (slices, a comparison, outputs in the object store) of the project."""
    admin = await project.admin()
    return await rich_report(client, admin, db, app.state.resources.object_store)


async def test_report_page_verify_export_and_download(
    project: Project, browser: httpx.AsyncClient, rich: dict[str, Any]
) -> None:
    report = rich
    report_id = report["report_id"]
    await sign_in(browser, await project.token("report.read", "report.export", "dataset.read_body"))
    page = await browser.get(f"/reports/{report_id}")
    assert page.status_code == 200
    html = page.text
    assert "Pass</span>" in html and "rag v1" in html
    assert html.count('role="img"') >= 2 * 4  # an interval and a coverage drawing per row
    assert "adjusted p" in html and "accuracy / german" in html
    assert report["digest"] in html
    verified = await browser.post(
        f"/reports/{report_id}/verify", content=f"csrf={csrf_of(html)}", headers=FORM
    )
    assert verified.status_code == 200 and "Verified: the stored bytes hash" in verified.text
    forged = await browser.post(f"/reports/{report_id}/verify", content="csrf=x", headers=FORM)
    assert forged.status_code == 400
    exported = await browser.post(
        f"/reports/{report_id}/export", content=f"csrf={csrf_of(html)}", headers=FORM
    )
    assert exported.status_code == 200, exported.text
    link = re.search(r'href="(/bundles/[0-9a-f-]+/download)"', exported.text)
    assert link
    download = await browser.get(link.group(1))
    assert download.status_code == 200 and download.content[:2] == b"\x1f\x8b"


async def test_permissions_and_projects_apply_to_pages(
    project: Project,
    other_project: Project,
    browser: httpx.AsyncClient,
    client: httpx.AsyncClient,
    rich: dict[str, Any],
) -> None:
    report_id = rich["report_id"]
    await sign_in(browser, await other_project.token("report.read", "report.export"))
    assert (await browser.get(f"/reports/{report_id}")).status_code == 404
    assert (await browser.get(f"/reports/{uuid.uuid4()}")).status_code == 404
    await sign_in(browser, await project.token("report.read"))
    page = await browser.get(f"/reports/{report_id}")
    assert page.status_code == 200 and "Export a bundle" not in page.text
    refused = await browser.post(
        f"/reports/{report_id}/export", content=f"csrf={csrf_of(page.text)}", headers=FORM
    )
    assert refused.status_code == 403 and "report.export" in refused.text
    await sign_in(browser, await project.token("report.export"))
    assert (await browser.get("/reports")).status_code == 403
    assert (await browser.get("/reports?result=maybe")).status_code in (400, 403)


async def test_revoking_the_token_ends_its_sessions(
    project: Project, browser: httpx.AsyncClient, client: httpx.AsyncClient, db: Any
) -> None:
    token = await project.token("report.read")
    await sign_in(browser, token)
    assert (await browser.get("/reports")).status_code == 200
    async with db() as session, session.begin():
        await session.execute(
            text("UPDATE api_tokens SET revoked_at = now() WHERE project_id = :p"),
            {"p": project.id},
        )
    assert (await browser.get("/reports")).status_code == 303


async def test_superseded_links_both_ways_and_the_subject_page(
    project: Project, browser: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    admin = await project.admin()
    await define_suite(client, admin)
    ids = []
    for _ in range(2):
        evaluation = await start_evaluation(client, admin)
        answer = await client.post(
            f"/api/v1/evaluations/{evaluation['evaluation_id']}/finish", headers=admin
        )
        ids.append(answer.json()["report_id"])
    await sign_in(browser, await project.token("report.read"))
    old = (await browser.get(f"/reports/{ids[0]}")).text
    assert "This report is superseded (re evaluation" in old
    assert f'href="/reports/{ids[1]}"' in old
    new = (await browser.get(f"/reports/{ids[1]}")).text
    assert f'href="/reports/{ids[0]}"' in new
    subject = await browser.get("/subjects/sha1:0123456789abcdef0123456789abcdef01234567")
    assert subject.status_code == 200
    assert (
        subject.text.index(ids[1])
        < subject.text.index("Superseded history")
        < subject.text.index(ids[0])
    )
    listing = (await browser.get("/reports", params={"status": "superseded"})).text
    assert ids[0] in listing and ids[1] not in listing


async def test_bad_filters_are_error_pages_not_server_errors(
    project: Project, browser: httpx.AsyncClient
) -> None:
    """U+0000 reaches no text column; a malformed cursor is refused before any query."""
    signed = await sign_in(browser, await project.token("report.read"))
    assert signed.status_code == 303
    for path, status in (
        ("/reports?suite=a%00", 422),
        ("/reports?subject_digest=%00", 422),
        ("/subjects/sha1%3A%00", 422),
        ("/reports?cursor=nope", 400),
        (f"/reports?cursor=1.{'0' * 32}", 400),  # a position without its check
        ("/reports?subject=" + "x" * 201, 400),
        ("/reports?result=maybe", 400),
    ):
        page = await browser.get(path)
        assert page.status_code == status, (path, page.text[:300])
        assert page.headers["content-type"].startswith("text/html")
        assert "U+0000" in page.text or status == 400


async def test_every_page_answer_carries_the_security_headers(
    project: Project, browser: httpx.AsyncClient
) -> None:
    answers = [await browser.get("/signin"), await browser.get("/reports")]  # a redirect
    signed = await sign_in(browser, await project.token("report.read"))
    answers += [
        signed,
        await browser.get("/reports"),
        await browser.get(f"/reports/{uuid.uuid4()}"),
    ]
    assert [a.status_code for a in answers] == [200, 303, 303, 200, 404]
    for answer in answers:
        policy = answer.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert answer.headers["referrer-policy"] == "same-origin"
        assert answer.headers["x-content-type-options"] == "nosniff"


async def test_a_report_with_an_open_incident_says_so_on_its_page(
    project: Project, client: httpx.AsyncClient, browser: httpx.AsyncClient, database_url: str
) -> None:
    from tests.factories import finished

    admin = await project.admin()
    await define_suite(client, admin)
    report = await finished(client, admin)
    await behind_the_triggers(
        database_url,
        uuid.UUID(report["report_id"]),
        "UPDATE reports SET body = body || ' '::bytea WHERE id = $1",
    )
    await client.post(
        "/evaluations/api/reports/verify", json={"report_id": report["report_id"]}, headers=admin
    )
    await sign_in(browser, await project.token("report.read"))
    page = await browser.get(f"/reports/{report['report_id']}")
    assert page.status_code == 200
    assert "Integrity incident" in page.text and 'role="alert"' in page.text
