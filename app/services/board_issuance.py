"""Making, serving and listing boards (docs/boards.md): a board is computed from the current
gate reports, its canonical body digested and signed by the active report key (predicate
`https://evalbook.dev/board/v1`), stored immutably and logged as a `board` entry, all in the
request's one transaction; it never changes after."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app.aggregation.board_body import BoardMeta, board_body
from app.digest.canonical import canonical_and_digest, timestamp
from app.digest.signing import board_statement, envelope
from app.domain.errors import NotFound
from app.domain.reports import subject_name
from app.identity.auth import Principal
from app.platform.db import ReadConnection, ReadPool
from app.repositories import boards as repo
from app.repositories import definitions as definition_repo
from app.repositories.boards import StoredBoard
from app.repositories.raw import driver_of
from app.services import signing, transparency
from app.services.boards import compute_board
from app.services.kit.compiled import SuiteCache
from app.services.kit.cursors import decode_cursor, split_page

PAGE_LIMIT = 100


@dataclass(frozen=True)
class BoardRequest:
    """What a board is asked for: a check of a suite version, the subjects (None: every one
    with a current gate report) and the family-wise alpha."""

    suite: str
    version: str
    check_id: str
    subjects: list[str] | None
    alpha: float


def served(board: StoredBoard, log_index: int | None = None) -> dict[str, Any]:
    """A board as the API serves it: its identity, what it ranks, and its body (as stored)."""
    answer: dict[str, Any] = {
        "board_id": str(board.id),
        "digest": board.digest,
        "attestation_digest": board.attestation_digest,
        "check_id": board.check_id,
        "subjects": board.subjects,
        "created_at": timestamp(board.created_at),
        "body": orjson.Fragment(board.body),
    }
    if log_index is not None:
        answer["log_index"] = log_index
    return answer


async def create(
    session: AsyncSession,
    principal: Principal,
    suites: SuiteCache,
    signer: signing.Signer,
    asked: BoardRequest,
    pool: ReadPool,
) -> dict[str, Any]:
    """Compute, sign, store and log a board; the board as served, with its log index."""
    computed = await compute_board(
        session,
        principal,
        suites,
        (asked.suite, asked.version, asked.check_id),
        asked.subjects,
        asked.alpha,
        pool,
    )
    # The key's row is held until commit: a rotation waits, so the signer was active now.
    key = await signing.hold_active_key(session)
    board_id, created_at = uuid.uuid4(), datetime.now(UTC)
    meta = BoardMeta(str(board_id), computed.suite_ref, asked.check_id, timestamp(created_at))
    body = board_body(computed.board, meta)
    body_bytes, digest = await asyncio.to_thread(canonical_and_digest, body)
    signed = envelope(board_statement(body_bytes, str(board_id), digest), signer.private(key.keyid))
    stored = StoredBoard(
        board_id,
        principal.project_id,
        computed.suite_id,
        computed.suite_version_id,
        asked.check_id,
        len(computed.board.placed) + len(computed.board.excluded),
        body_bytes,
        digest,
        key.keyid,
        signed,
        "sha256:" + hashlib.sha256(signed).hexdigest(),
        created_at,
    )
    connection = await driver_of(session)
    await repo.insert(connection, stored)
    index = await repo.append_to_log(connection, board_id)
    return served(stored, index)


async def read(reader: ReadConnection, principal: Principal, board_id: uuid.UUID) -> StoredBoard:
    """A board of the caller's project, or 404."""
    found = await repo.get(reader, principal.project_id, board_id)
    if found is None:
        raise NotFound("no such board")
    return found


async def page(
    session: AsyncSession,
    principal: Principal,
    suite: str | None,
    cursor: str | None,
    limit: int,
) -> dict[str, Any]:
    """The project's boards (of one suite when named), newest first, without their bodies."""
    suite_id = None
    if suite is not None:
        found = await definition_repo.get_suite(session, principal.project_id, suite)
        if found is None:
            raise NotFound(f"no suite {suite!r} in this project")
        suite_id = found.id
    after = None if cursor is None else decode_cursor(cursor)
    rows = await repo.page(
        await driver_of(session), principal.project_id, suite_id, after, limit + 1
    )
    boards, next_cursor = split_page(rows, limit, lambda b: (b.created_at, b.id))
    listed = []
    for board in boards:
        item = served(board)
        body = orjson.loads(board.body)
        item.pop("body")
        item.update(suite_ref=body["suite_ref"], top_group=body["top_group"])
        listed.append(item)
    return {"boards": listed, "next_cursor": next_cursor}


async def board_log(
    reader: ReadConnection,
    principal: Principal,
    log: transparency.TransparencyLog,
    board_id: uuid.UUID,
) -> dict[str, Any]:
    """A board's entry, its index, the newest checkpoint and the inclusion proof to it."""
    await read(reader, principal, board_id)
    found = await transparency.entry_and_proof(reader, log, board_id, kind="board")
    if found is None:
        raise NotFound("this board has no log entry")
    return {"board_id": str(board_id), **found}


@dataclass(frozen=True)
class BoardView:
    """What the board's page shows: the stored board, its body, and each subject's name."""

    board: StoredBoard
    body: dict[str, Any]
    names: dict[str, str | None]


async def view(reader: ReadConnection, principal: Principal, board_id: uuid.UUID) -> BoardView:
    """A board of the caller's project with its subjects' names (from their reports)."""
    board = await read(reader, principal, board_id)
    body = orjson.loads(board.body)
    entries = [*body["subjects"], *body["excluded"]]
    subjects = await repo.subjects_of_reports(reader, [uuid.UUID(e["report_id"]) for e in entries])
    names = {
        e["subject"]: subject_name(orjson.loads(subjects.get(uuid.UUID(e["report_id"])) or "null"))
        for e in entries
    }
    return BoardView(board, body, names)


async def suite_boards(
    reader: ReadConnection, principal: Principal, suite: str, limit: int = 20
) -> list[dict[str, Any]]:
    """The newest boards of a suite, as its history page links them."""
    found = await repo.of_suite_named(reader, principal.project_id, suite, limit)
    listed = []
    for board in found:
        body = orjson.loads(board.body)
        listed.append(
            {
                "board_id": str(board.id),
                "check_id": board.check_id,
                "version": body["suite_ref"]["version"],
                "subjects": board.subjects,
                "top_group": len(body["top_group"]),
                "created_at": board.created_at,
            }
        )
    return listed
