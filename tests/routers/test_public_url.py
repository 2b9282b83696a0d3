"""Where clients reach the service: the configured public URL, else the served address, else
the address each request reached; never a fixed default."""

from __future__ import annotations

import httpx

from app.api.main import create_app
from app.cli.commands import served_url
from app.platform.config import Settings
from tests.conftest import Project
from tests.factories import define_suite, finished


def test_the_served_address_is_the_public_url() -> None:
    assert served_url("127.0.0.1", 8123) == "http://127.0.0.1:8123"
    assert served_url("evalbook.internal", 80) == "http://evalbook.internal:80"
    assert served_url("::1", 8000) == "http://[::1]:8000"
    assert served_url("0.0.0.0", 8000) is None


async def test_without_a_configured_url_each_request_names_the_address_it_reached(
    settings: Settings, project: Project
) -> None:
    app = create_app(settings.model_copy(update={"public_base_url": None}))
    headers = await project.admin()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://reports.example:8080"
        ) as http:
            await define_suite(http, headers)
            report = await finished(http, headers)
            report_id = report["report_id"]
            assert report["envelope"]["url"] == f"http://reports.example:8080/reports/{report_id}"
            for path in (
                f"/evaluations/api/reports/{report_id}",
                f"/evaluations/api/reports/forSubject?digest={report['body']['subject']['digest']}",
            ):
                answer = (await http.get(path, headers=headers)).json()
                found = answer if "envelope" in answer else answer["reports"][0]
                assert found["envelope"]["url"].startswith("http://reports.example:8080/reports/")
