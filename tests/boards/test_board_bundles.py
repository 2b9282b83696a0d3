"""Board bundles (docs/boards.md, "Proof") through both verifiers: a genuine bundle (McNemar,
and the paired t-test over repeats) is proven by both, with the same document; a changed case,
a changed p-value and a dropped subject are refused by both with the same failure codes; a key
or log key given is held to."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from tests.bundle_helpers import node_verify, python_verify
from tests.bundles.edits import canonical, reseal
from tests.conftest import Project, auth
from tests.factories import BOARD_FIELD, define_suite, issue_board_subject
from tests.services.test_transparency import fresh_checkpoint, log_verifier

BOARDS = "/evaluations/api/boards"


async def make_bundle(
    project: Project,
    client: httpx.AsyncClient,
    target: Path,
    check: str = "accuracy",
    app: FastAPI | None = None,
) -> dict[str, Any]:
    """A board of the four BOARD_FIELD subjects on `check`, its bundle saved at `target` (once
    a checkpoint covers the board's entry, with `app`)."""
    headers = await project.admin()
    await define_suite(client, headers)
    for subject in BOARD_FIELD:
        await issue_board_subject(client, headers, subject)
    made = await client.post(
        BOARDS, json={"suite": "rag", "version": "1", "check_id": check}, headers=headers
    )
    assert made.status_code == 201, made.text
    board: dict[str, Any] = made.json()
    if app is not None:
        await fresh_checkpoint(app, client)
    exporter = auth(await project.token("report.export", "report.read"))
    answer = await client.post(f"{BOARDS}/{board['board_id']}/bundle", headers=exporter)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/vnd.evalbook.board-bundle.v1+jsonl.gzip"
    digest = "sha256:" + hashlib.sha256(answer.content).hexdigest()
    assert answer.headers["evalbook-bundle-digest"] == digest
    await asyncio.to_thread(target.write_bytes, answer.content)
    return board


def _both(path: Path, *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both verifiers' exit and document: they must agree on the exit."""
    python_code, python_out = python_verify(path, *extra)
    node_code, node_out = node_verify(path, *extra)
    assert python_code == node_code, (python_out, node_out)
    return python_out, node_out


def _codes(document: dict[str, Any]) -> set[str]:
    return {f["code"] for f in document["failures"]}


def _rewrite(source: Path, target: Path, change: Any) -> None:
    lines = gzip.decompress(source.read_bytes()).splitlines()
    target.write_bytes(gzip.compress(b"".join(line + b"\n" for line in reseal(change(lines)))))


async def test_a_board_bundle_is_proven_by_both_verifiers(
    project: Project, client: httpx.AsyncClient, app: FastAPI, tmp_path: Path
) -> None:
    path = tmp_path / "board.jsonl.gz"
    board = await make_bundle(project, client, path, app=app)
    python_out, node_out = await asyncio.to_thread(_both, path)
    assert python_out["ok"] and python_out == node_out, (python_out, node_out)
    assert python_out["board_digest"] == board["digest"]
    assert python_out["proven"]["pairs"] == 6 + 1 and python_out["proven"]["ranks"] == 4
    assert python_out["proven"]["cases_root"] == 2 * 4 and python_out["proven"]["log"] == 1
    assert python_out["signer"]["trusted"] is False

    # The keys given are held to: the service's key makes it trusted; another key refuses it.
    keys = (await client.get("/.well-known/evalbook/keys")).json()
    vkey = (await log_verifier(client)).vkey()
    key = keys["keys"][-1]["public_key"]
    python_out, node_out = await asyncio.to_thread(_both, path, "--key", key, "--log-key", vkey)
    assert python_out["ok"] and python_out == node_out
    assert python_out["signer"]["trusted"] and python_out["log"]["trusted"]
    stranger = "A" * 43 + "="
    python_out, node_out = await asyncio.to_thread(_both, path, "--key", stranger)
    assert _codes(python_out) == _codes(node_out) == {"untrusted"}


async def test_a_board_of_means_over_repeats_is_proven_by_both(
    project: Project, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    path = tmp_path / "means.jsonl.gz"
    board = await make_bundle(project, client, path, check="helpfulness")
    assert board["body"]["methods"]["pairwise"] == "paired_t"
    python_out, node_out = await asyncio.to_thread(_both, path)
    assert python_out["ok"] and python_out == node_out, (python_out, node_out)
    assert python_out["proven"]["pairs"] == 7


def _flip_a_case(lines: list[bytes]) -> list[bytes]:
    """The first case of the first ranked report: its status turned."""
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"kind":"case"'))
    value = orjson.loads(lines[at])
    value["record"]["status"] = "fail" if value["record"]["status"] == "pass" else "pass"
    return [*lines[:at], canonical(value), *lines[at + 1 :]]


def _change_a_p_value(lines: list[bytes]) -> list[bytes]:
    """The board body's first pair: its raw p-value halved (the digest and statement kept)."""
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"attestation"'))
    value = orjson.loads(lines[at])
    value["body"]["pairs"][0]["p_value"] /= 2
    return [*lines[:at], canonical(value), *lines[at + 1 :]]


def _drop_a_subject(lines: list[bytes]) -> list[bytes]:
    """The last report line and its cases removed."""
    last = max(i for i, line in enumerate(lines) if orjson.loads(line).get("kind") == "report")
    return lines[:last]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_flip_a_case, {"cases_root", "pairs"}),
        (_change_a_p_value, {"board_digest", "attestation", "pairs"}),
        (_drop_a_subject, {"report"}),
    ],
    ids=["changed case", "changed p-value", "dropped subject"],
)
async def test_a_forged_board_bundle_is_refused_alike(
    project: Project, client: httpx.AsyncClient, tmp_path: Path, change: Any, expected: set[str]
) -> None:
    genuine = tmp_path / "genuine.jsonl.gz"
    await make_bundle(project, client, genuine)
    forged = tmp_path / "forged.jsonl.gz"
    _rewrite(genuine, forged, change)
    python_out, node_out = await asyncio.to_thread(_both, forged)
    assert not python_out["ok"]
    assert _codes(python_out) == _codes(node_out) == expected, (python_out, node_out)
