"""Peer callbacks go to https URLs on public addresses only: refused at link time and again
before every delivery (no connection made), never redirected, and connected to the very
address that was checked. Addresses other than loopback appear here only where the service
refuses them before connecting; no name is looked up in DNS (static host tables)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.api.main import create_app
from app.identity.auth import PrincipalCache
from app.models import Peer
from app.platform.config import Settings
from app.platform.outbound import CallbackPolicy, CallbackRefused
from app.repositories.peers import notifications_for
from app.workers.notifications import NotificationWorker
from tests.conftest import Project
from tests.factories import define_suite, finished
from tests.receivers import Receiver
from tests.served import uvicorn_serving
from tests.services.test_peers import link

STRICT_HOSTS = {
    "localhost": ["127.0.0.1"],
    "rebind.test": ["10.0.0.7"],
    "mixed.test": ["198.51.100.1", "127.0.0.1"],
}
REFUSED = [
    ("http://169.254.169.254/latest/meta-data/", "https"),
    ("https://169.254.169.254/latest/meta-data/", "private"),
    ("https://127.0.0.1:5432/", "private"),
    ("https://[::1]/hooks", "private"),
    ("https://[::ffff:127.0.0.1]/hooks", "private"),
    ("https://10.1.2.3/hooks", "private"),
    ("https://172.16.0.1/hooks", "private"),
    ("https://192.168.1.1/hooks", "private"),
    ("https://100.64.0.1/hooks", "private"),
    ("https://0.0.0.0/hooks", "private"),
    ("https://localhost/hooks", "private"),
    ("https://rebind.test/hooks", "private"),
    ("https://mixed.test/hooks", "private"),
    ("https://2130706433/hooks", "resolve"),
    ("https://unknown.test/hooks", "resolve"),
    ("https://user:secret@localhost/hooks", "user name"),
]


async def test_links_to_private_or_plain_http_callbacks_are_refused(
    settings: Settings, project: Project, db: Any
) -> None:
    strict = settings.model_copy(
        update={
            "callback_allow_http": False,
            "callback_private_hosts": [],
            "callback_static_hosts": STRICT_HOSTS,
        }
    )
    headers = await project.admin()
    async with (
        uvicorn_serving(create_app(strict)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http,
    ):
        for url, reason in REFUSED:
            answer = await http.post(
                "/api/v1/peers", json={"name": "p", "callback_url": url}, headers=headers
            )
            assert answer.status_code == 422, (url, answer.text)
            problem = answer.json()
            assert problem["errors"][0]["loc"] == ["body", "callback_url"]
            assert reason in problem["detail"], (url, problem["detail"])
    async with db() as session:
        peers = await session.scalar(
            select(func.count()).select_from(Peer).where(Peer.project_id == project.id)
        )
    assert peers == 0


async def test_the_policy_pins_the_checked_address_and_keeps_the_peers_name() -> None:
    policy = CallbackPolicy(
        allow_http=True, private_hosts=["peer.test"], static_hosts={"peer.test": ["127.0.0.1"]}
    )
    target = await policy.check("http://peer.test:8080/hooks?x=1")
    assert str(target.url) == "http://127.0.0.1:8080/hooks?x=1"
    assert target.host_header == "peer.test:8080" and target.extensions == {}
    secure = await policy.check("https://peer.test/hooks")
    assert secure.extensions == {"sni_hostname": "peer.test"}
    assert secure.host_header == "peer.test"
    with pytest.raises(CallbackRefused, match="https"):
        await CallbackPolicy(static_hosts={}).check("http://peer.test/hooks")


def _to(receiver: Receiver, attempted: list[httpx.Request]) -> list[httpx.Request]:
    """The attempted requests that went to `receiver` (the worker delivers every project's
    due messages, other tests' leftovers included)."""
    return [request for request in attempted if request.url.port == receiver.port]


async def _attempt(
    settings: Settings,
    db: Any,
    policy: CallbackPolicy,
    attempted: list[httpx.Request],
    project: Project,
) -> Any:
    """Once the project's message is due (the test's backoff is short), one round of a worker
    under `policy`, recording every request it was about to send; the message after it."""

    async def record(request: httpx.Request) -> None:
        attempted.append(request)

    await asyncio.sleep(0.3)
    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        worker = NotificationWorker(settings, db, http, PrincipalCache(0), policy)
        await worker.run_once()
    async with db() as session:
        (note,) = await notifications_for(session, project.id)
    return note


async def _one_message_for(
    client: httpx.AsyncClient,
    project: Project,
    url: str,
    linking: httpx.AsyncClient | None = None,
) -> None:
    """Link a peer at `url` (through `linking`, else the shared app) and supersede a report:
    one message for it."""
    headers = await project.admin()
    await define_suite(client, headers)
    await link(linking or client, headers, url)
    await finished(client, headers)
    await finished(client, headers)


async def test_a_delivery_to_an_address_that_became_private_is_refused_before_connecting(
    settings: Settings, project: Project, client: httpx.AsyncClient, db: Any, receiver: Receiver
) -> None:
    await _one_message_for(client, project, receiver.url)
    attempted: list[httpx.Request] = []
    # The peer's name now resolves elsewhere, or plain http is no longer allowed.
    for policy in (
        CallbackPolicy(allow_http=True, static_hosts={}),
        CallbackPolicy(allow_http=False, private_hosts=["127.0.0.1"], static_hosts={}),
    ):
        note = await _attempt(settings, db, policy, attempted, project)
        assert note.last_error.startswith("refused before connecting"), note.last_error
    assert note.attempts == 2 and note.status == "pending"
    assert _to(receiver, attempted) == [] and receiver.attempts == 0


async def test_a_rebound_name_is_refused_and_a_pinned_one_is_called_by_its_address(
    settings: Settings, project: Project, client: httpx.AsyncClient, db: Any, receiver: Receiver
) -> None:
    name = f"peer-{uuid.uuid4().hex[:6]}.test"
    linked = settings.model_copy(
        update={
            "callback_private_hosts": [name],
            "callback_static_hosts": {name: ["127.0.0.1"]},
        }
    )
    async with (
        uvicorn_serving(create_app(linked)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http,
    ):
        await _one_message_for(client, project, f"http://{name}:{receiver.port}/hooks", http)
    attempted: list[httpx.Request] = []
    rebound = CallbackPolicy(allow_http=True, static_hosts={name: ["10.0.0.7"]})
    note = await _attempt(settings, db, rebound, attempted, project)
    assert _to(receiver, attempted) == [] and receiver.attempts == 0
    assert "refused before connecting" in note.last_error and "10.0.0.7" in note.last_error
    await _attempt(settings, db, CallbackPolicy.from_settings(linked), attempted, project)
    assert [request.url.host for request in _to(receiver, attempted)] == ["127.0.0.1"]
    ((sent, _),) = receiver.received
    assert sent["host"] == f"{name}:{receiver.port}"


async def test_a_redirect_is_never_followed(
    settings: Settings, project: Project, client: httpx.AsyncClient, db: Any
) -> None:
    elsewhere = Receiver()
    redirecting = Receiver(answer=307, location=elsewhere.url)
    servers = [elsewhere.serve(), redirecting.serve()]
    try:
        await _one_message_for(client, project, redirecting.url)
        attempted: list[httpx.Request] = []
        policy = CallbackPolicy.from_settings(settings)
        note = await _attempt(settings, db, policy, attempted, project)
        assert redirecting.attempts == 1 and elsewhere.attempts == 0
        assert len(_to(redirecting, attempted)) == 1 and _to(elsewhere, attempted) == []
        assert note.last_error == "HTTP 307" and note.status == "pending"
    finally:
        for server in servers:
            server.shutdown()
