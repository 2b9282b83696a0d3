"""Peers: linking, the peer report endpoint, and signed notifications over real HTTP."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from app.api.main import create_app
from app.platform.config import Settings
from tests.conftest import Project, auth, free_port
from tests.factories import define_suite, finished, first_report, problem, suite_body
from tests.receivers import Receiver

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


@asynccontextmanager
async def delivering(settings: Settings):
    """A second service process's worth of app: its worker delivers the outbox."""
    app = create_app(settings.model_copy(update={"notifications_enabled": True}))
    async with app.router.lifespan_context(app):
        yield app


async def wait_for(predicate, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def link(client: httpx.AsyncClient, headers: dict[str, str], url: str) -> dict[str, Any]:
    response = await client.post(
        "/api/v1/peers", json={"name": "codebook", "callback_url": url}, headers=headers
    )
    assert response.status_code == 201, response.text
    return response.json()


async def test_link_list_unlink_and_authz(
    project: Project, other_project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    peer = await link(client, headers, "https://127.0.0.1:8443/hooks")
    assert peer["token"].startswith("evb_") and peer["signing_secret"].startswith("whsec_")
    listed = (await client.get("/api/v1/peers", headers=headers)).json()["peers"]
    assert [p["peer_id"] for p in listed] == [peer["peer_id"]] and "token" not in listed[0]
    problem(
        await client.get("/api/v1/peers", headers=auth(await project.token("report.read"))), 403
    )
    problem(await client.get("/api/v1/peers", headers=auth(peer["token"])), 403)
    problem(
        await client.post(
            "/api/v1/peers", json={"name": "x", "callback_url": "ftp://x"}, headers=headers
        ),
        422,
    )
    problem(await client.post("/api/v1/peers", json={"name": "x"}, headers=headers), 422)
    problem(
        await client.delete(
            f"/api/v1/peers/{peer['peer_id']}", headers=await other_project.admin()
        ),
        404,
    )
    assert (
        await client.delete(f"/api/v1/peers/{peer['peer_id']}", headers=headers)
    ).status_code == 204
    assert (await client.get("/api/v1/peers", headers=headers)).json()["peers"] == []
    problem(
        await client.post(
            "/project/api/peer/report",
            json={"report_id": peer["peer_id"]},
            headers=auth(peer["token"]),
        ),
        401,
    )


async def test_peer_report_endpoint(
    project: Project, other_project: Project, client: httpx.AsyncClient
) -> None:
    headers, report = await first_report(project, client)
    peer = auth((await link(client, headers, "https://127.0.0.1:8443/hooks"))["token"])
    by_report = await client.post(
        "/project/api/peer/report", json={"report_id": report["report_id"]}, headers=peer
    )
    assert by_report.status_code == 200 and by_report.json()["digest"] == report["digest"]
    by_evaluation = await client.post(
        "/project/api/peer/report",
        json={"evaluation_id": report["body"]["evaluation_id"]},
        headers=peer,
    )
    assert by_evaluation.json()["report_id"] == report["report_id"]
    problem(
        await client.post(
            "/project/api/peer/report", json={"report_id": report["report_id"]}, headers=headers
        ),
        403,
    )
    problem(await client.post("/project/api/peer/report", json={}, headers=peer), 422)
    problem(
        await client.post(
            "/project/api/peer/report",
            json={
                "report_id": report["report_id"],
                "evaluation_id": report["body"]["evaluation_id"],
            },
            headers=peer,
        ),
        422,
    )
    problem(
        await client.post("/project/api/peer/report", json={"report_id": "nope"}, headers=peer), 422
    )
    other_peer = auth(
        (await link(client, await other_project.admin(), "https://127.0.0.1:8443/h"))["token"]
    )
    problem(
        await client.post(
            "/project/api/peer/report", json={"report_id": report["report_id"]}, headers=other_peer
        ),
        404,
    )
    problem(await client.get(f"/evaluations/api/reports/{report['report_id']}", headers=peer), 403)


async def test_supersession_is_signed_and_delivered_after_a_restart(
    project: Project, client: httpx.AsyncClient, settings: Settings, receiver: Receiver
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    peer = await link(client, headers, receiver.url)
    first = await finished(client, headers)
    second = await finished(client, headers)
    await asyncio.sleep(0.3)
    assert receiver.received == [], "the shared app runs no worker: nothing is delivered yet"
    async with delivering(settings):
        await wait_for(lambda: len(receiver.received) == 1)
    headers_sent, body = receiver.received[0]
    payload = Webhook(peer["signing_secret"]).verify(body, headers_sent)
    assert payload == {
        "type": "report.superseded",
        "data": {"report_id": first["report_id"], "superseded_by": second["report_id"]},
    }
    assert headers_sent["webhook-id"].startswith("msg_")
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + "A" * 43).verify(body, headers_sent)


async def test_a_failing_receiver_gets_the_message_after_retries(
    project: Project, client: httpx.AsyncClient, settings: Settings, db
) -> None:
    failing = Receiver(fail_first=2)
    server = failing.serve()
    try:
        headers = await project.admin()
        await define_suite(client, headers)
        await link(client, headers, failing.url)
        await finished(client, headers)
        await finished(client, headers)
        from app.repositories.peers import notifications_for

        async def recorded() -> list[Any]:
            async with db() as session:
                return await notifications_for(session, project.id)

        async with delivering(settings):
            await wait_for(lambda: len(failing.received) == 1)
            # The answer arrives before the worker records it: wait for the record too.
            deadline = time.monotonic() + 10
            while (await recorded())[0].status != "delivered":
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        assert failing.attempts == 3
        (note,) = await recorded()
        assert note.status == "delivered" and note.attempts == 3
    finally:
        server.shutdown()


async def test_activation_notifies_and_410_disables(
    project: Project, client: httpx.AsyncClient, settings: Settings, db
) -> None:
    gone = Receiver(answer=410)
    server = gone.serve()
    try:
        headers = await project.admin()
        await define_suite(client, headers)
        await link(client, headers, gone.url)
        report = await finished(client, headers)
        await client.put("/api/v1/suites/rag/versions/2", json=suite_body(), headers=headers)
        activated = await client.post("/api/v1/suites/rag/versions/2/activate", headers=headers)
        assert activated.json()["superseded_report_ids"] == [report["report_id"]]
        async with delivering(settings):
            await wait_for(lambda: len(gone.received) == 1)
            deadline = time.monotonic() + 10
            while (await client.get("/api/v1/peers", headers=headers)).json()["peers"][0][
                "status"
            ] != "disabled":
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
        assert gone.received[0][1] == (
            b'{"type":"report.superseded","data":{"report_id":"'
            + report["report_id"].encode()
            + b'","superseded_by":null}}'
        )
        (peer,) = (await client.get("/api/v1/peers", headers=headers)).json()["peers"]
        assert peer["status"] == "disabled" and "410" in peer["status_reason"]
    finally:
        server.shutdown()


async def test_notifications_give_up_after_the_horizon(
    project: Project, client: httpx.AsyncClient, settings: Settings, db
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    await link(client, headers, f"http://127.0.0.1:{free_port()}/nobody")
    await finished(client, headers)
    await finished(client, headers)
    from app.repositories.peers import notifications_for

    async with delivering(settings.model_copy(update={"notify_horizon_seconds": 0.5})):

        async def failed() -> bool:
            async with db() as session:
                notes = await notifications_for(session, project.id)
            return bool(notes) and notes[0].status == "failed"

        deadline = time.monotonic() + 10
        while not await failed():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
    async with db() as session:
        (note,) = await notifications_for(session, project.id)
    assert note.attempts >= 1 and "ConnectError" in (note.last_error or "")


async def test_two_service_processes_deliver_each_message_once(
    project: Project, client: httpx.AsyncClient, settings: Settings, receiver: Receiver
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    await link(client, headers, receiver.url)
    await link(client, headers, receiver.url)
    for _ in range(6):
        await finished(client, headers)
    # 5 supersessions x 2 peers; two workers claim side by side with SKIP LOCKED.
    async with delivering(settings), delivering(settings):
        await wait_for(lambda: len(receiver.received) >= 10)
        await asyncio.sleep(0.3)
    ids = [h["webhook-id"] for h, _ in receiver.received]
    assert len(ids) == 10 and len(set(ids)) == 10
