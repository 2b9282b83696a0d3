"""C2SP tlog-witness: `evalbook witness --serve` answers add-checkpoint as the protocol says
(200 with its cosignature, 409 with the size it holds, 403, 404, 400, 422), served in a process
of its own; and the service, given the witness's submission URL, pushes each new checkpoint to
it and serves the cosignature it answers with."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import FastAPI

from app.api.main import create_app
from app.api.state import state_of
from app.digest.signing import write_private_key
from app.platform.config import Settings
from app.platform.db import reading
from app.tlog import checkpoint as checkpoints
from app.tlog import note, tiles
from tests.bundle_helpers import issue
from tests.conftest import REPO, Project, free_port, witness_vkey
from tests.factories import define_suite, suite_body
from tests.services.test_transparency import _cases, fresh_checkpoint

NAME = "pushed.witness"


@contextlib.asynccontextmanager
async def witness_serving(key: Path, log_vkey: str, state: Path) -> AsyncIterator[str]:
    """`evalbook witness --serve` in a process of its own; its submission prefix."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli.main",
        "witness",
        "--serve",
        f"127.0.0.1:{port}",
        "--key",
        str(key),
        "--name",
        NAME,
        "--log-key",
        log_vkey,
        "--state",
        str(state),
        cwd=REPO,
        env=dict(os.environ),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        assert "serving http://127.0.0.1" in line, line
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 10)


def _request(old: int, proof: list[bytes], signed: bytes) -> bytes:
    lines = b"".join(base64.b64encode(p) + b"\n" for p in proof)
    return f"old {old}\n".encode() + lines + b"\n" + signed


async def _newest(app: FastAPI, client: httpx.AsyncClient) -> tuple[int, bytes, bytes]:
    await fresh_checkpoint(app, client)
    latest = await state_of(app).transparency.checkpoint()
    assert latest is not None
    return latest


async def test_the_witness_api_and_the_push(
    project: Project,
    client: httpx.AsyncClient,
    app: FastAPI,
    settings: Settings,
    log_key_file: Path,
    tmp_path: Path,
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    await issue(client, headers, _cases())
    size, _, signed = await _newest(app, client)
    log = state_of(app).transparency
    key_file = write_private_key(tmp_path, Ed25519PrivateKey.generate())
    vkey = witness_vkey(key_file, NAME)
    async with (
        witness_serving(key_file, log.key.verifier.vkey(), tmp_path / "w.json") as url,
        httpx.AsyncClient(base_url=url, timeout=30) as witness,
    ):
        add = "/add-checkpoint"
        answer = await witness.post(add, content=_request(0, [], signed))
        assert answer.status_code == 200, answer.text
        text = note.split(signed)[0]
        (cosignature,) = note.split(text.encode() + b"\n" + answer.content)[1]
        assert note.verify_cosignature(text, cosignature, note.parse_vkey(vkey))
        # The size it holds, named in text/x.tlog.size.
        answer = await witness.post(add, content=_request(0, [], signed))
        assert answer.status_code == 409 and answer.text == f"{size}\n"
        assert answer.headers["content-type"] == "text/x.tlog.size"
        # Another root for the same size, signed with the log's own key: 409.
        other = checkpoints.Checkpoint(log.key.name, size, bytes(32)).text()
        forked = note.signed_note(other, [note.sign(other, log.key.name, log.key.private)])
        answer = await witness.post(add, content=_request(size, [], forked))
        assert answer.status_code == 409
        # Signed by a stranger under the log's origin: 403; a log it does not know: 404.
        stranger = Ed25519PrivateKey.generate()
        by_stranger = note.signed_note(text, [note.sign(text, log.key.name, stranger)])
        assert (await witness.post(add, content=_request(size, [], by_stranger))).status_code == 403
        elsewhere = checkpoints.Checkpoint("elsewhere.example/log", 1, bytes(32)).text()
        unknown = note.signed_note(
            elsewhere, [note.sign(elsewhere, "elsewhere.example/log", stranger)]
        )
        assert (await witness.post(add, content=_request(0, [], unknown))).status_code == 404
        # Malformed, or an old size past the checkpoint's: 400.
        for body in (b"old 01\n\n" + signed, b"no blank line", _request(size + 1, [], signed)):
            assert (await witness.post(add, content=body)).status_code == 400, body[:20]

        # The log grows: a bent proof is 422, the true one is cosigned.
        await issue(client, headers, _cases())
        grown, _, grown_signed = await _newest(app, client)
        async with reading(log.pool) as connection:
            proof = await tiles.consistency_proof(log.elements_on(connection), size, grown)
        bent = [bytes(32), *proof[1:]] if proof else [bytes(32)]
        assert (
            await witness.post(add, content=_request(size, bent, grown_signed))
        ).status_code == 422
        answer = await witness.post(add, content=_request(size, proof, grown_signed))
        assert answer.status_code == 200, answer.text

        # The service pushes to it: a process given its submission URL asks it to cosign each
        # new checkpoint (first with old 0, then the size the witness names) and keeps the line.
        pushing = create_app(
            settings.model_copy(
                update={
                    "log_witness_keys": [*settings.log_witness_keys, vkey],
                    "log_witness_urls": {NAME: url},
                }
            )
        )
        async with pushing.router.lifespan_context(pushing):
            await issue(client, headers, _cases())
            for _ in range(400):
                served = (await client.get("/log/checkpoint")).content
                text, lines = note.split(served)
                pushed = [line for line in lines if line.name == NAME]
                if pushed:
                    assert note.verify_cosignature(text, pushed[0], note.parse_vkey(vkey))
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"the pushed witness never cosigned: {served!r}")
