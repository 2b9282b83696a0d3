"""Hardening, third round (the edges): a peer that drips its answer costs the other peers
nothing; a tile index of thousands of digits is a 404 like any bad index; every IPv6 form
that embeds an IPv4 address, or is site-local, is refused as a callback before connecting;
uvicorn's own 400 carries `nosniff`; a `peer.manage` token cannot mint a reader of reports."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from typing import Any

import httpx
import pytest

from app.api.main import create_app
from app.platform.config import Settings
from app.platform.outbound import CallbackPolicy, CallbackRefused, is_public
from app.repositories.peers import notifications_for
from app.tlog import tiles
from tests.conftest import Project, auth
from tests.factories import define_suite, finished, problem
from tests.receivers import Receiver
from tests.served import uvicorn_serving

pytestmark = pytest.mark.server


class DrippingPeer:
    """A loopback HTTP peer that reads a delivery, sends its head, then one byte of its body
    every `every` seconds (each read well within httpx's per-read timeout)."""

    def __init__(self, every: float = 0.5, length: int = 200) -> None:
        self.every = every
        self.length = length
        self.connected = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connected.set()
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(f"HTTP/1.1 200 OK\r\ncontent-length: {self.length}\r\n\r\n".encode())
            for _ in range(self.length):
                await writer.drain()
                await asyncio.sleep(self.every)
                writer.write(b"x")
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


async def _link(client: httpx.AsyncClient, headers: dict[str, str], url: str) -> None:
    linked = await client.post(
        "/api/v1/peers", json={"name": "peer", "callback_url": url}, headers=headers
    )
    assert linked.status_code == 201, linked.text


async def test_a_dripping_peer_holds_no_other_peer_back(
    settings: Settings,
    project: Project,
    other_project: Project,
    client: httpx.AsyncClient,
    receiver: Receiver,
    db: Any,
) -> None:
    slow = DrippingPeer()
    await slow.start()
    served = settings.model_copy(
        update={"notifications_enabled": True, "notify_timeout_seconds": 3.0}
    )
    try:
        headers, others = await project.admin(), await other_project.admin()
        for h in (headers, others):
            await define_suite(client, h)
        await _link(client, headers, slow.url)
        await _link(client, others, receiver.url)
        await finished(client, headers)
        await finished(client, headers)
        async with uvicorn_serving(create_app(served)):
            await asyncio.wait_for(slow.connected.wait(), 10)
            # While the slow peer drips (it would take 100 s), the other project's peer is
            # told of its supersession within a second of it.
            await finished(client, others)
            await finished(client, others)
            superseded = time.monotonic()
            while not receiver.received:
                assert time.monotonic() - superseded < 2.0, "the healthy peer was held back"
                await asyncio.sleep(0.02)
            # The slow delivery is given up at its deadline, as a failed attempt.
            deadline = time.monotonic() + 10
            while True:
                async with db() as session:
                    (note,) = await notifications_for(session, project.id)
                if note.last_error:
                    break
                assert time.monotonic() < deadline, "the slow delivery was never cut off"
                await asyncio.sleep(0.1)
        assert note.status == "pending" and "no whole answer within 3 s" in note.last_error
    finally:
        await slow.stop()


@pytest.mark.parametrize(
    "index",
    ["1" * 4503, "x123/" * 900 + "456", "x001/234.p/" + "9" * 5000, "٠٠٠", "x١٢٣/456", "00１"],
)
def test_a_tile_index_is_checked_before_any_conversion(index: str) -> None:
    with pytest.raises(tiles.TileError):
        tiles.parse_index(index)


async def test_long_and_non_ascii_tile_indexes_are_404s_on_a_kept_connection(
    settings: Settings,
) -> None:
    async with (
        uvicorn_serving(create_app(settings)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http,
    ):
        for path in (
            "/log/tile/0/x123/" + "1" * 4503,
            "/log/tile/0/" + "x123/" * 30 + "456",
            "/log/tile/entries/٠٠٠",
            "/log/tile/0/x١٢٣/456",
        ):
            answer = await http.get(path)
            assert answer.status_code in (404, 422), (path[:40], answer.status_code)
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers.get("connection") != "close"
        assert (await http.get("/healthz")).status_code == 200


EMBEDDING = [
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b:1::a9fe:a9fe",  # local-use NAT64
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "::7f00:1",  # IPv4-compatible 127.0.0.1
    "::ffff:7f00:1",  # IPv4-mapped 127.0.0.1
    "::ffff:8.8.8.8",  # IPv4-mapped, even of a public address
    "::ffff:0:8.8.8.8",  # IPv4-translated
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "2606:4700::5efe:a9fe:a9fe",  # ISATAP interface identifier
    "fec0::1",  # site-local (deprecated)
]


@pytest.mark.parametrize("literal", EMBEDDING)
async def test_ipv6_forms_that_embed_ipv4_are_refused_before_connecting(literal: str) -> None:
    assert not is_public(ipaddress.ip_address(literal))
    policy = CallbackPolicy(static_hosts={"peer.test": [literal]})
    with pytest.raises(CallbackRefused, match="private, loopback or reserved"):
        await policy.check(f"https://[{literal}]/hooks")
    with pytest.raises(CallbackRefused, match="private, loopback or reserved"):
        await policy.check("https://peer.test/hooks")


async def test_a_public_ipv6_address_is_still_a_callback() -> None:
    target = await CallbackPolicy(static_hosts={}).check("https://[2606:4700::1111]/hooks")
    assert target.url.host == "2606:4700::1111"


async def test_uvicorns_own_400_is_a_problem_with_nosniff(settings: Settings) -> None:
    async with uvicorn_serving(create_app(settings)) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nhost: x\r\nbad header\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer
    assert b"x-content-type-options: nosniff" in head.lower()
    assert b"application/problem+json" in head and b'"status":400' in body


async def test_a_peer_manage_token_without_report_read_cannot_link(
    project: Project, client: httpx.AsyncClient, db: Any
) -> None:
    manager = auth(await project.token("peer.manage"))
    refused = await client.post(
        "/api/v1/peers",
        json={"name": "reader", "callback_url": "https://127.0.0.1/hooks"},
        headers=manager,
    )
    assert "report.read" in problem(refused, 403)["detail"]
    assert (await client.get("/api/v1/peers", headers=manager)).json()["peers"] == []
    both = auth(await project.token("peer.manage", "report.read"))
    linked = await client.post(
        "/api/v1/peers",
        json={"name": "reader", "callback_url": "https://127.0.0.1/hooks"},
        headers=both,
    )
    assert linked.status_code == 201, linked.text
