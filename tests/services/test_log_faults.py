"""A stored log that disagrees with itself is never signed and never freezes the log quietly:
a junk checkpoint row or an uncovered entry gone opens the log's incident, /readyz says
so, and once the owner has mended the store and closed the incident the log goes on (each on a
database of its own, with the real service)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncpg
import httpx
import pytest

from app.api.main import create_app
from app.api.state import state_of
from app.platform.config import Settings, to_plain_url
from tests.clients.test_gate import _define, _report
from tests.conftest import cli_admin_token
from tests.factories import evalbook_cli
from tests.services.test_log_insiders import insider, settled

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


async def log_incident(owner: str) -> tuple[int, str] | None:
    """The log's open incident (id, detail), if any."""
    connection = await asyncpg.connect(to_plain_url(owner))
    try:
        row = await connection.fetchrow(
            "SELECT id, detail FROM incidents WHERE report_id IS NULL AND resolved_at IS NULL"
        )
        return None if row is None else (row["id"], row["detail"])
    finally:
        await connection.close()


async def test_a_junk_checkpoint_or_a_missing_entry_opens_the_logs_incident(
    own_database: tuple[str, str], settings: Settings, tmp_path: Path
) -> None:
    owner, service = own_database
    admin = await asyncio.to_thread(cli_admin_token, owner)
    # The background cutter cuts once at start and then not for an hour: every cut below is
    # the test's own, so none races the rows the test removes (a cut of entries 4 and 5 before
    # entry 4 is deleted would leave nothing uncovered to find).
    served = create_app(
        settings.model_copy(update={"database_url": service, "log_checkpoint_seconds": 3600})
    )
    headers = {"Authorization": f"Bearer {admin}"}
    env = {**os.environ, "EVALBOOK_DATABASE_URL": owner}
    async with served.router.lifespan_context(served):
        log = state_of(served).transparency
        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="https://evalbook.test") as c:
            await _define(c, headers)
            for n in range(3):
                await _report(c, headers, "sha1:" + f"{n}" * 40, ["pass"] * 4)
            await settled(log, 3)
            assert (await c.get("/readyz")).status_code == 200

            # 1. A junk checkpoint row far ahead (only the owner, triggers aside, can write
            # one): the next cut does not wait for the log to reach it; it opens the incident.
            await insider(
                owner,
                (
                    "INSERT INTO log_checkpoints (size, root, note) VALUES (1000000, $1, 'junk')",
                    (b"\0" * 32,),
                ),
            )
            await _report(c, headers, "sha1:" + "7" * 40, ["pass"] * 4)
            assert await log.cut() is None
            found = await log_incident(owner)
            assert found is not None
            # (the background cutter may have found it first, one report earlier)
            assert "the newest checkpoint covers 1000000 entries; the log holds" in found[1]
            ready = await c.get("/readyz")
            assert ready.status_code == 503
            assert "the transparency log is inconsistent" in ready.json()["detail"]

            # Mended by the owner, closed (audited), the log goes on from the stored tree.
            await insider(owner, ("DELETE FROM log_checkpoints WHERE size = 1000000", ()))
            code, out = await evalbook_cli(
                "incidents", "resolve", str(found[0]), "--reason", "junk row removed", env=env
            )
            assert code == 0, out
            assert (await c.get("/readyz")).status_code == 200
            await settled(log, 4)
            again = await log_incident(owner)
            assert again is None, again

            # 2. An entry not yet covered, gone (the entries after a checkpoint are what a cut
            # reads; those before it are the witnesses' and the monitor's to hold).
            await _report(c, headers, "sha1:" + "8" * 40, ["pass"] * 4)
            await _report(c, headers, "sha1:" + "9" * 40, ["pass"] * 4)
            await insider(owner, ("DELETE FROM log_entries WHERE idx = 4", ()))
            assert await log.cut() is None
            found = await log_incident(owner)
            assert found is not None and "entries are missing in [4, 6)" in found[1], found
            assert (await c.get("/readyz")).status_code == 503
            newest = await log.checkpoint()
            assert newest is not None and newest[0] == 4

    # The resolution is kept, with who closed it and why; the service's login cannot undo it.
    connection = await asyncpg.connect(to_plain_url(owner))
    try:
        kept = await connection.fetch("SELECT actor, reason FROM incident_resolutions")
    finally:
        await connection.close()
    assert [(r["actor"].split()[0], r["reason"]) for r in kept] == [("owner", "junk row removed")]
    connection = await asyncpg.connect(to_plain_url(service))
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute("DELETE FROM incident_resolutions")
    finally:
        await connection.close()
