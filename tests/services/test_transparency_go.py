"""The log's checkpoints, tiles, entry bundles and proofs read by an implementation this
project did not write: Go's golang.org/x/mod/sumdb/note and sumdb/tlog (Debian's
golang-golang-x-mod-dev, which `.ci/run` and `make test` install), through
tests/go/tlogcheck against a served process."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.api.main import create_app
from app.api.state import state_of
from app.platform.config import Settings
from app.platform.db import reading
from app.repositories import transparency as repo
from app.services.transparency import TransparencyLog
from app.tlog import checkpoint, note
from tests.bundle_helpers import issue
from tests.conftest import REPO, Project
from tests.factories import define_suite, suite_body
from tests.served import uvicorn_serving
from tests.services.test_transparency import _cases

GOPATH = Path("/usr/share/gocode")


@pytest.fixture(scope="module")
def tlogcheck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The Go checker, built in GOPATH mode against Debian's x/mod sources."""
    go = shutil.which("go")
    assert go, "these tests need Go (Debian: apt-get install golang-go golang-golang-x-mod-dev)"
    assert (GOPATH / "src/golang.org/x/mod/sumdb/tlog").is_dir(), "golang-golang-x-mod-dev"
    out = tmp_path_factory.mktemp("go") / "tlogcheck"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": str(GOPATH),
        "GOCACHE": str(out.parent / "cache"),
        "GOFLAGS": "",
    }
    subprocess.run(
        [go, "build", "-o", str(out), "."],
        cwd=REPO / "tests/go/tlogcheck",
        env=env,
        check=True,
        timeout=300,
    )
    yield out


async def _check(binary: Path, base: str, vkey: str, *old: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(binary),
        base,
        vkey,
        *old,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, output.decode()
    return output.decode()


async def _cut_to_the_end(log: TransparencyLog) -> None:
    """Cut until the newest checkpoint covers the whole log. Another process's cutter may hold
    the lock when this one tries, and cut later; a checker that read the checkpoint before
    that cut would then ask for a partial tile the log no longer serves."""
    for _ in range(100):
        await log.cut()
        latest = await log.checkpoint()
        async with reading(log.pool) as connection:
            size = await repo.size(connection)
        if latest is not None and latest[0] == size:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the log's checkpoint never caught up with the log")


async def test_go_sumdb_reads_the_log(
    tlogcheck: Path, settings: Settings, project: Project, client: httpx.AsyncClient
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    for _ in range(3):
        await issue(client, headers, _cases())
    served_app = create_app(settings)
    async with uvicorn_serving(served_app) as port:
        base = f"http://127.0.0.1:{port}"
        log = state_of(served_app).transparency
        await _cut_to_the_end(log)
        async with httpx.AsyncClient(base_url=base) as http:
            vkey = (await http.get("/.well-known/evalbook/keys")).json()["log"]["vkey"]
            first = checkpoint.parse(
                note.verify((await http.get("/log/checkpoint")).content, note.parse_vkey(vkey))
            )
        output = await _check(tlogcheck, base, vkey)
        assert f"ok size={first.size}" in output
        for _ in range(2):
            await issue(client, headers, _cases())
        await _cut_to_the_end(log)
        old_root = base64.b64encode(first.root).decode()
        output = await _check(tlogcheck, base, vkey, str(first.size), old_root)
        assert "ok size=" in output
        # Every earlier checkpoint's tree, read from the partial tiles of its own size (C2SP
        # tlog-tiles: served at any width the newest tree holds), as its clients read it.
        async with reading(log.pool) as connection:
            earlier = await connection.fetch(
                "SELECT size, root FROM log_checkpoints WHERE size > 0 ORDER BY size"
            )
        assert len(earlier) >= 3
        for row in earlier[-12:]:
            at = base64.b64encode(bytes(row["root"])).decode()
            output = await _check(tlogcheck, base, vkey, f"@{row['size']}", at)
            assert f"ok size={row['size']}" in output
        # A root the log never had at that size: Go's CheckTree refuses the proof.
        wrong = base64.b64encode(bytes(32)).decode()
        process = await asyncio.create_subprocess_exec(
            str(tlogcheck), base, vkey, str(first.size), wrong, stdout=asyncio.subprocess.PIPE
        )
        await process.communicate()
        assert process.returncode == 1
