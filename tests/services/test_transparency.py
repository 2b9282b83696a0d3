"""The transparency log over HTTP: entries appended with reports and supersessions, signed
checkpoints, tiles and entry bundles, a report's inclusion proof, witness cosignatures."""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.state import state_of
from app.digest import merkle
from app.digest.signing import load_private_key
from app.tlog import checkpoint, note, tiles
from tests.bundle_helpers import issue
from tests.conftest import Project
from tests.factories import case, define_suite, problem, suite_body

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


def _cases() -> list[dict[str, Any]]:
    out = [case("accuracy", f"e{i:02d}") for i in range(12)]
    out += [case("no_harm", f"e{i:02d}") for i in range(12)]
    out += [case("helpfulness", f"e{i:02d}", r, score=0.8) for i in range(12) for r in range(2)]
    return out


async def log_verifier(client: httpx.AsyncClient) -> note.Verifier:
    """The log's note key, from the public keys document."""
    keys = (await client.get("/.well-known/evalbook/keys")).json()
    return note.parse_vkey(keys["log"]["vkey"])


async def fresh_checkpoint(app: FastAPI, client: httpx.AsyncClient) -> checkpoint.Checkpoint:
    """The newest checkpoint, once it covers every committed entry (cut here, or by the
    background cutter when it holds the lock), its signature checked."""
    import asyncio

    from app.platform.db import reading
    from app.repositories import transparency as log_repo

    log = state_of(app).transparency
    for _ in range(200):
        await log.cut()
        async with reading(log.pool) as connection:
            size = await log_repo.size(connection)
        answer = await client.get("/log/checkpoint")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain")
        stated = checkpoint.parse(note.verify(answer.content, await log_verifier(client)))
        if stated.size == size:
            return stated
        await asyncio.sleep(0.05)
    raise AssertionError("no checkpoint covered the log")


async def test_reports_and_supersessions_are_logged_and_proven(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    first = await issue(client, headers, _cases())
    second = await issue(client, headers, _cases())
    tree = await fresh_checkpoint(app, client)
    assert tree.origin == "evalbook.test/log"
    # Every entry, from the entry bundles; the root recomputed from them.
    entries: list[bytes] = []
    for n in range(-(-tree.size // 256)):
        width = min(256, tree.size - n * 256)
        index = tiles.encode_index(n) + ("" if width == 256 else f".p/{width}")
        bundle = await client.get(f"/log/tile/entries/{index}")
        assert bundle.status_code == 200
        entries += tiles.split_bundle(bundle.content)
        hashes = await client.get(f"/log/tile/0/{index}")
        leaves = [merkle.leaf_hash(e) for e in entries[n * 256 :]]
        assert hashes.content == b"".join(leaves)
    assert len(entries) == tree.size
    assert merkle.root([merkle.leaf_hash(e) for e in entries]) == tree.root
    decoded = [json.loads(e) for e in entries]
    mine = [
        e
        for e in decoded
        if second["report_id"] in (e.get("report_id"), e.get("successor_report_id"))
    ]
    assert [e["kind"] for e in mine] == ["report", "supersession"]
    report, supersession = mine
    assert report["report_digest"] == second["digest"]
    assert report["attestation_digest"].startswith("sha256:")
    assert report["suite"]["digest"] == second["body"]["suite_ref"]["digest"]
    assert supersession["superseded_report_id"] == first["report_id"]
    statement = await client.get(
        f"/evaluations/api/reports/{first['report_id']}/supersession-attestation", headers=headers
    )
    import hashlib

    assert (
        supersession["statement_digest"]
        == "sha256:" + hashlib.sha256(statement.content).hexdigest()
    )
    # The report's own proof.
    answer = await client.get(
        f"/evaluations/api/reports/{second['report_id']}/log", headers=headers
    )
    assert answer.status_code == 200, answer.text
    proof = answer.json()
    assert proof["entry"] == report
    leaf = merkle.leaf_hash(entries[proof["index"]])
    path = [base64.b64decode(p) for p in proof["inclusion_proof"]]
    stated = checkpoint.parse(note.verify(proof["checkpoint"].encode(), await log_verifier(client)))
    assert merkle.verify_inclusion(leaf, proof["index"], stated.size, path, stated.root)


async def test_tiles_beyond_the_checkpoint_and_bad_paths(
    client: httpx.AsyncClient, app: FastAPI, project: Project
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    await issue(client, headers, _cases())
    tree = await fresh_checkpoint(app, client)
    width = tree.size % 256 or 256
    last = tiles.encode_index((tree.size - 1) // 256)
    assert (await client.get(f"/log/tile/0/{last}.p/{width}")).status_code in (200, 404)
    for path in (
        f"/log/tile/0/{tiles.encode_index(tree.size // 256 + 1)}",
        "/log/tile/0/abc",
        "/log/tile/0/000.p/0",
        "/log/tile/64/000",
        "/log/tile/entries/x000/001",
    ):
        answer = await client.get(path)
        assert answer.status_code in (404, 422), (path, answer.status_code)
    if width != 256:
        beyond = await client.get(f"/log/tile/0/{last}.p/{width + 1}")
        assert beyond.status_code in (200, 404)  # 200 only when the log grew meanwhile
        full = await client.get(f"/log/tile/0/{last}")
        assert full.status_code in (200, 404)
    if width > 1:
        # A partial tile of an earlier checkpoint: served, and cacheable like a full one.
        earlier = await client.get(f"/log/tile/0/{last}.p/{width - 1}")
        assert earlier.status_code == 200, earlier.text
        assert len(earlier.content) == 32 * (width - 1)
        assert earlier.headers["cache-control"] == "public, max-age=31536000, immutable"
    # Digits are ASCII: the same index in Arabic-Indic digits names no tile.
    for path in ("/log/tile/0/\u0660\u0660\u0660", "/log/tile/entries/\u0660\u0660\u0660"):
        assert (await client.get(path)).status_code == 404, path
    # Entry bundles come gzip-compressed when asked, the same bytes once decompressed.
    plain = await client.get("/log/tile/entries/000.p/1", headers={"accept-encoding": "identity"})
    packed = await client.get("/log/tile/entries/000.p/1", headers={"accept-encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert packed.headers["content-encoding"] == "gzip"
    assert packed.content == plain.content and packed.headers["vary"] == "Accept-Encoding"


async def test_witness_cosignatures(
    client: httpx.AsyncClient, app: FastAPI, project: Project, witness_key: Path
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    await issue(client, headers, _cases())
    tree = await fresh_checkpoint(app, client)
    text = tree.text()
    key = load_private_key(witness_key)
    cosigned = note.signed_note(text, [note.cosign(text, "witness.test", key, int(time.time()))])
    answer = await client.post("/log/cosignatures", json={"note": cosigned.decode()})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"tree_size": tree.size}
    served = await client.get("/log/checkpoint")
    _, signatures = note.split(served.content)
    assert {s.name for s in signatures} == {"evalbook.test/log", "witness.test"}
    witness = note.parse_vkey(
        note.Verifier("witness.test", note.raw(key.public_key()), note.COSIGNATURE_V1).vkey()
    )
    (mine,) = [s for s in signatures if s.name == "witness.test"]
    assert note.verify_cosignature(text, mine, witness)
    # A key the service does not trust, a bad signature, a checkpoint never cut, junk.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    stranger = note.signed_note(
        text, [note.cosign(text, "stranger", Ed25519PrivateKey.generate(), 1)]
    )
    problem(await client.post("/log/cosignatures", json={"note": stranger.decode()}), 403)
    forged = note.signed_note(
        text, [note.cosign(text, "witness.test", Ed25519PrivateKey.generate(), 1)]
    )
    problem(await client.post("/log/cosignatures", json={"note": forged.decode()}), 403)
    other = checkpoint.Checkpoint(tree.origin, tree.size + 10_000_000, tree.root).text()
    never = note.signed_note(other, [note.cosign(other, "witness.test", key, 1)])
    problem(await client.post("/log/cosignatures", json={"note": never.decode()}), 404)
    problem(await client.post("/log/cosignatures", json={"note": "not a note"}), 404)
    problem(await client.post("/log/cosignatures", json={"note": 5}), 422)
    problem(await client.post("/log/cosignatures", json={}), 422)
    problem(await client.post("/log/cosignatures", json={"note": "x", "extra": 1}), 422)


async def test_report_log_needs_permission_and_project(
    client: httpx.AsyncClient, project: Project, other_project: Project
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    report = await issue(client, headers, _cases())
    url = f"/evaluations/api/reports/{report['report_id']}/log"
    problem(await client.get(url), 401)
    problem(await client.get(url, headers=await other_project.admin()), 404)
    from tests.conftest import auth

    problem(await client.get(url, headers=auth(await project.token("evaluation.write"))), 403)
    problem(
        await client.get(
            "/evaluations/api/reports/" + "0" * 8 + "-0000-4000-8000-" + "0" * 12 + "/log",
            headers=headers,
        ),
        404,
    )


async def test_the_report_page_shows_the_log_position(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    from tests.pages_helpers import sign_in

    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    report = await issue(client, headers, _cases())
    await state_of(app).transparency.cut()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as browser:
        assert (await sign_in(browser, await project.token("report.read"))).status_code == 303
        page = await browser.get(f"/reports/{report['report_id']}")
    assert page.status_code == 200
    answer = await client.get(
        f"/evaluations/api/reports/{report['report_id']}/log", headers=headers
    )
    index = answer.json()["index"]
    assert f'id="log-position">entry {index}, covered by the checkpoint of' in page.text


async def _tile_reads(client: httpx.AsyncClient) -> float:
    """The metrics' count of successful tile reads."""
    metrics = (await client.get("/metrics")).text
    pattern = r'evalbook_http_requests_total\{method="GET",route="/log/tile/\{level\}/\{index\}",status="200"\} (\S+)'
    return sum(float(value) for value in re.findall(pattern, metrics))


async def test_a_kept_full_tile_is_served_the_same_by_the_fast_lane(
    client: httpx.AsyncClient, app: FastAPI, project: Project
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    log = state_of(app).transparency
    tree = await fresh_checkpoint(app, client)
    while tree.size < 256:
        await issue(client, headers, _cases())
        tree = await fresh_checkpoint(app, client)
    routed = await client.get("/log/tile/0/000")  # computed and kept by the routed endpoint
    assert routed.status_code == 200 and len(routed.content) == 256 * 32
    assert log.cached_tile(0, 0) == routed.content
    counted = await _tile_reads(client)
    again = await client.get("/log/tile/0/000")  # now from the lane, outside every middleware
    assert again.content == routed.content
    assert dict(again.headers) == dict(routed.headers)
    assert again.headers["x-content-type-options"] == "nosniff"
    # Counted under the routed endpoint's template, as if it had gone through the metrics.
    assert await _tile_reads(client) == counted + 1
    entries = await client.get("/log/tile/entries/000")
    assert (await client.get("/log/tile/entries/000")).content == entries.content


async def test_concurrent_cuts_take_turns_and_keep_one_tree(
    client: httpx.AsyncClient, app: FastAPI, project: Project
) -> None:
    """Cuts racing in one process (the background cutter and callers): one at a time holds
    the lock and cuts, the others step aside; the checkpoints stay the tree of the leaves."""
    import asyncio

    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    log = state_of(app).transparency
    for _ in range(6):
        await issue(client, headers, _cases())
        cut = await asyncio.gather(*(log.cut() for _ in range(8)))
        assert len([c for c in cut if c is not None]) <= 1, cut
    await log.cut()
    tree = await fresh_checkpoint(app, client)
    entries: list[bytes] = []
    for n in range(-(-tree.size // 256)):
        width = min(256, tree.size - n * 256)
        index = tiles.encode_index(n) + ("" if width == 256 else f".p/{width}")
        entries += tiles.split_bundle((await client.get(f"/log/tile/entries/{index}")).content)
    assert merkle.root([merkle.leaf_hash(e) for e in entries]) == tree.root
