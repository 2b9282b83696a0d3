"""Boards over HTTP (docs/boards.md): made from the current gate reports, stored immutably,
signed by the report key and logged as a `board` entry; read, listed and proven; refused with
a clear problem (and nothing stored) for bad input, another project, a missing permission."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.digest import merkle
from app.digest.canonical import canonical_bytes, is_canonical
from app.digest.signing import BOARD_PREDICATE, verify_envelope
from app.platform.config import Settings, to_plain_url
from app.tlog import checkpoint, note
from tests.conftest import Project, auth
from tests.factories import BOARD_FIELD, define_suite, issue_board_subject, problem
from tests.services.test_transparency import fresh_checkpoint, log_verifier

BOARDS = "/evaluations/api/boards"
ASK = {"suite": "rag", "version": "1", "check_id": "accuracy"}


async def _field(project: Project, client: httpx.AsyncClient) -> dict[str, Any]:
    headers = await project.admin()
    await define_suite(client, headers)
    return {s: await issue_board_subject(client, headers, s) for s in BOARD_FIELD}


async def _counts(database_url: str) -> tuple[int, int]:
    connection = await asyncpg.connect(to_plain_url(database_url))
    try:
        boards = await connection.fetchval("SELECT count(*) FROM boards")
        entries = await connection.fetchval("SELECT count(*) FROM log_entries")
        return boards, entries
    finally:
        await connection.close()


async def test_a_board_is_signed_stored_logged_and_proven(
    project: Project, client: httpx.AsyncClient, app: FastAPI
) -> None:
    reports = await _field(project, client)
    writer = auth(await project.token("board.write", "report.read"))
    made = await client.post(BOARDS, json=ASK, headers=writer)
    assert made.status_code == 201, made.text
    board = made.json()
    body = board["body"]
    data = canonical_bytes(body)
    assert is_canonical(data) and board["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
    assert body["board_id"] == board["board_id"] and body["check_id"] == "accuracy"
    assert body["suite_ref"] == reports[next(iter(reports))]["body"]["suite_ref"]
    assert {s["subject"] for s in body["subjects"]} == set(BOARD_FIELD)
    assert [s["report_id"] for s in body["subjects"]] == [
        reports[s["subject"]]["report_id"] for s in body["subjects"]
    ]
    assert board["subjects"] == 4 and isinstance(board["log_index"], int)

    reader = auth(await project.token("report.read"))
    again = await client.get(f"{BOARDS}/{board['board_id']}", headers=reader)
    assert again.status_code == 200 and again.json()["body"] == body

    # The statement: signed by the report key, over this body and digest.
    envelope = await client.get(f"{BOARDS}/{board['board_id']}/attestation", headers=reader)
    assert envelope.status_code == 200
    assert board["attestation_digest"] == "sha256:" + hashlib.sha256(envelope.content).hexdigest()
    keys = (await client.get("/.well-known/evalbook/keys")).json()["keys"]
    public = {k["keyid"]: base64.b64decode(k["public_key"]) for k in keys}
    statement = verify_envelope(envelope.content, public)
    assert statement["predicateType"] == BOARD_PREDICATE
    assert statement["predicate"] == {
        "board": body,
        "board_digest": board["digest"],
        "board_id": board["board_id"],
    }
    assert statement["subject"][0]["digest"] == {"sha256": board["digest"].split(":")[1]}

    # The log: the entry the database computed, its inclusion in a signed checkpoint.
    tree = await fresh_checkpoint(app, client)
    logged = await client.get(f"{BOARDS}/{board['board_id']}/log", headers=reader)
    assert logged.status_code == 200, logged.text
    proof = logged.json()
    assert proof["index"] == board["log_index"]
    assert proof["entry"] == {
        "kind": "board",
        "board_id": board["board_id"],
        "board_digest": board["digest"],
        "attestation_digest": board["attestation_digest"],
        "check_id": "accuracy",
        "created_at": body["created_at"],
        "suite": {k: body["suite_ref"][k] for k in ("digest", "id", "version")},
    }
    stated = checkpoint.parse(note.verify(proof["checkpoint"].encode(), await log_verifier(client)))
    assert stated.size >= tree.size
    leaf = merkle.leaf_hash(canonical_bytes(proof["entry"]))
    path = [base64.b64decode(p) for p in proof["inclusion_proof"]]
    assert merkle.verify_inclusion(leaf, proof["index"], stated.size, path, stated.root)


async def test_boards_are_listed_newest_first_and_paged(
    project: Project, client: httpx.AsyncClient
) -> None:
    await _field(project, client)
    writer = auth(await project.token("board.write", "report.read"))
    made = [
        (await client.post(BOARDS, json={**ASK, "check_id": check}, headers=writer)).json()
        for check in ("accuracy", "helpfulness", "accuracy")
    ]
    first = await client.get(BOARDS, params={"suite": "rag", "limit": 2}, headers=writer)
    assert first.status_code == 200, first.text
    page = first.json()
    rest = await client.get(BOARDS, params={"cursor": page["next_cursor"]}, headers=writer)
    listed = page["boards"] + rest.json()["boards"]
    assert [b["board_id"] for b in listed] == [b["board_id"] for b in reversed(made)]
    assert rest.json()["next_cursor"] is None
    assert all("body" not in b and b["top_group"] for b in listed)
    assert made[1]["body"]["methods"]["pairwise"] == "paired_t"
    problem(await client.get(BOARDS, params={"suite": "nope"}, headers=writer), 404)
    problem(await client.get(BOARDS, params={"cursor": "x.y"}, headers=writer), 400)


async def test_bad_boards_are_refused_and_store_nothing(
    project: Project,
    other_project: Project,
    client: httpx.AsyncClient,
    settings: Settings,
) -> None:
    await _field(project, client)
    url = settings.database_url
    assert url is not None
    before = await _counts(url)
    writer = auth(await project.token("board.write", "report.read"))
    subjects = list(BOARD_FIELD)
    refusals: list[tuple[dict[str, Any] | bytes, int, str]] = [
        ({**ASK, "alpha": "0.05"}, 422, "alpha"),
        ({"suite": "rag", "version": "1"}, 422, "check_id"),
        ({**ASK, "alpha": 0}, 422, "alpha"),
        ({**ASK, "extra": 1}, 422, "extra"),
        (b'{"suite": "rag", "version": "1", "check_id": "accuracy", "alpha": NaN}', 422, ""),
        (b'{"suite": "rag", "suite": "rag", "version": "1", "check_id": "accuracy"}', 422, "dup"),
        ({**ASK, "version": "9"}, 404, "no suite"),
        ({**ASK, "suite": "other"}, 404, "no suite"),
        ({**ASK, "check_id": "nope"}, 422, "not a check"),
        ({**ASK, "subjects": [subjects[0], subjects[0]]}, 422, "each subject once"),
        ({**ASK, "subjects": [subjects[0]]}, 422, "2 to 200"),
        ({**ASK, "subjects": ["sha1:" + f"{i:040x}" for i in range(201)]}, 422, "200"),
        ({**ASK, "subjects": [subjects[0], "sha1:" + "9" * 40]}, 422, "without a current"),
        (b"{" + b'"suite": "' + b"r" * 3_000_000 + b'"}', 413, ""),
    ]
    for sent, status, words in refusals:
        if isinstance(sent, bytes):
            answer = await client.post(
                BOARDS, content=sent, headers={**writer, "content-type": "application/json"}
            )
        else:
            answer = await client.post(BOARDS, json=sent, headers=writer)
        found = problem(answer, status)
        assert words.lower() in json.dumps(found).lower(), (sent, found)

    # Another project's subjects have no current report here; its token cannot read ours.
    other = await other_project.admin()
    problem(await client.post(BOARDS, json=ASK, headers=other), 404)
    mine = (await client.post(BOARDS, json=ASK, headers=writer)).json()
    problem(await client.get(f"{BOARDS}/{mine['board_id']}", headers=other), 404)
    problem(await client.get(f"{BOARDS}/{mine['board_id']}/log", headers=other), 404)
    problem(await client.get(f"{BOARDS}/{uuid.uuid4()}", headers=writer), 404)
    after_one = await _counts(url)
    assert after_one == (before[0] + 1, before[1] + 1)

    # Permissions: board.write needs report.read too; a reader may not make one.
    for permissions in (("report.read",), ("board.write",), ("report.export",)):
        token = auth(await project.token(*permissions))
        problem(await client.post(BOARDS, json=ASK, headers=token), 403)
    problem(await client.post(BOARDS, json=ASK), 401)
    assert await _counts(url) == after_one


async def test_boards_made_at_once_take_contiguous_log_indexes(
    project: Project, client: httpx.AsyncClient, settings: Settings
) -> None:
    await _field(project, client)
    writer = auth(await project.token("board.write", "report.read"))
    answers = await asyncio.gather(
        *(client.post(BOARDS, json=ASK, headers=writer) for _ in range(6))
    )
    assert [a.status_code for a in answers] == [201] * 6
    indexes = sorted(a.json()["log_index"] for a in answers)
    assert len(set(indexes)) == 6
    url = settings.database_url
    assert url is not None
    connection = await asyncpg.connect(to_plain_url(url))
    try:
        rows = await connection.fetch(
            "SELECT idx, kind FROM log_entries WHERE idx >= $1 AND idx <= $2 ORDER BY idx",
            indexes[0],
            indexes[-1],
        )
    finally:
        await connection.close()
    # Contiguous: no index skipped, whatever else was logged between them.
    assert [r["idx"] for r in rows] == list(range(indexes[0], indexes[-1] + 1))


@pytest.mark.server
async def test_a_stored_board_never_changes_and_is_logged_once(
    project: Project, client: httpx.AsyncClient, settings: Settings
) -> None:
    from tests.services.test_service_login import refused

    await _field(project, client)
    writer = auth(await project.token("board.write", "report.read"))
    board = (await client.post(BOARDS, json=ASK, headers=writer)).json()
    service = settings.database_url
    assert service is not None
    board_id = uuid.UUID(board["board_id"])
    for statement in (
        "UPDATE boards SET body = 'x' WHERE id = $1",
        "DELETE FROM boards WHERE id = $1",
    ):
        error = await refused(service, statement, board_id)
        assert isinstance(error, asyncpg.InsufficientPrivilegeError), (statement, error)
    error = await refused(service, "SELECT evalbook_log_append_boards($1)", [uuid.uuid4()])
    assert "only 0 of 1 named boards can be logged" in str(error)
    error = await refused(service, "SELECT evalbook_log_append_boards($1)", [board_id])
    assert isinstance(error, asyncpg.UniqueViolationError)
    error = await refused(
        service,
        "INSERT INTO log_entries (idx, kind, report_id, entry, leaf)"
        " VALUES (1000000, 'board', $1, 'x', $2)",
        board_id,
        b"\0" * 32,
    )
    assert isinstance(error, asyncpg.InsufficientPrivilegeError)
    again = await client.get(f"{BOARDS}/{board['board_id']}", headers=writer)
    assert again.json()["digest"] == board["digest"]
