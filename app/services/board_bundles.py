"""A board bundle (docs/boards.md, "Proof"): the board, its signed statement and its log proof,
the suite version, and each ranked report (body and signed statement) with every case record of
the board's check, so that a verifier recomputes every pair, the correction and the rank
intervals from the cases and checks each report's cases root. Built on request into a spooled
file (gzip JSON Lines, canonical), never stored: every part of it is immutable."""

from __future__ import annotations

import gzip
import hashlib
import tempfile
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from app import __version__
from app.bundles.board_format import BOARD_FORMAT
from app.bundles.writing import line, raw
from app.digest import merkle
from app.digest.canonical import canonical_bytes, timestamp
from app.identity.auth import Principal
from app.platform.db import ReadConnection
from app.repositories import boards as repo
from app.repositories import definitions as definition_repo
from app.repositories import integrity as integrity_repo
from app.repositories import signing as signing_repo
from app.repositories.boards import StoredBoard
from app.repositories.raw import driver_of
from app.services import signing as signing_service
from app.services.board_issuance import read
from app.services.transparency import TransparencyLog, entry_and_proof

BATCH = 10_000
# Case records are mostly digests: level 1 keeps most of level 6's gain at a third of its time.
GZIP_LEVEL = 1
# The spooled file stays in memory up to this size, then moves to disk.
IN_MEMORY = 8 << 20


@dataclass
class BoardBundle:
    """A built bundle: its gzip bytes in a file (at the start), their size and sha256."""

    file: IO[bytes]
    size: int
    digest: str


class _Writer:
    """Lines into a gzip stream, counted and hashed for the trailer."""

    def __init__(self, target: IO[bytes]) -> None:
        self.gzip = gzip.GzipFile(fileobj=target, mode="wb", compresslevel=GZIP_LEVEL, mtime=0)
        self.lines = 0
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> None:
        """One line."""
        self.write_many([data])

    def write_many(self, lines: list[bytes]) -> None:
        """Lines, compressed and hashed at once."""
        data = b"\n".join(lines) + b"\n"
        self.gzip.write(data)
        self.hash.update(data)
        self.lines += len(lines)

    def close(self) -> None:
        trailer = {
            "kind": "trailer",
            "lines": self.lines,
            "sha256": "sha256:" + self.hash.hexdigest(),
        }
        self.gzip.write(line(trailer) + b"\n")
        self.gzip.close()


def case_record_line(row: Any, scorer_digest: str) -> bytes:
    """A `case` line: the case record a report's cases tree commits to, as its leaf input."""
    record = merkle.stored_case_record(row["example_id"], row["repeat"], row, scorer_digest)
    return b'{"kind":"case","record":' + record + b"}"


async def _keys(session: AsyncSession, keyids: set[str]) -> list[dict[str, Any]]:
    """The public keys that signed the board and its reports, as the keys document lists them."""
    found = []
    for keyid in sorted(keyids):
        key = await signing_repo.get_key(session, keyid)
        assert key is not None, f"key {keyid} signed what the bundle holds"
        found.append(signing_service.key_entry(key))
    return found


async def _board_log(
    reader: ReadConnection, log: TransparencyLog, board_id: uuid.UUID
) -> dict[str, Any] | None:
    found = await entry_and_proof(reader, log, board_id, kind="board")
    if found is None:
        return None
    found.pop("tree_size", None)
    return {**found, "key": log.key.verifier.vkey()}


async def _write_reports(
    writer: _Writer,
    reader: ReadConnection,
    board: StoredBoard,
    entries: list[dict[str, Any]],
    reports: dict[uuid.UUID, Any],
    scorer_digests: dict[str, str],
) -> None:
    """Each ranked (and excluded) report's line, then every case record of the board's check."""
    for entry in entries:
        report = reports[uuid.UUID(entry["report_id"])]
        report_line: dict[str, Any] = {
            "kind": "report",
            "report_id": entry["report_id"],
            "digest": report["digest"],
            "body": raw(bytes(report["body"])),
        }
        if report["envelope"] is not None:
            envelope = orjson.loads(bytes(report["envelope"]))
            report_line["attestation"] = raw(canonical_bytes(envelope))
        writer.write(line(report_line))
        batches = repo.case_record_batches(reader, report["evaluation_id"], board.check_id, BATCH)
        async for batch in batches:
            writer.write_many(
                [case_record_line(r, scorer_digests.get(r["scorer_version"]) or "") for r in batch]
            )


def _sealed(target: IO[bytes]) -> BoardBundle:
    """The written file, rewound, with its size and sha256."""
    size = target.tell()
    target.seek(0)
    digest = hashlib.sha256()
    while chunk := target.read(1 << 20):
        digest.update(chunk)
    target.seek(0)
    return BoardBundle(target, size, "sha256:" + digest.hexdigest())


async def build(
    session: AsyncSession, principal: Principal, log: TransparencyLog, board_id: uuid.UUID
) -> BoardBundle:
    """The board's bundle, written to a spooled file."""
    reader = await driver_of(session)
    board = await read(reader, principal, board_id)
    body = orjson.loads(board.body)
    entries = [*body["subjects"], *body["excluded"]]
    reports = await repo.reports_for_bundle(
        reader, principal.project_id, [uuid.UUID(e["report_id"]) for e in entries]
    )
    suite = await definition_repo.get_suite_version_by_id(session, board.suite_version_id)
    assert suite is not None, "a board's suite version exists"
    check = next(
        c for c in orjson.loads(suite.content)["checks"] if c["check_id"] == board.check_id
    )
    scorer_digests = await integrity_repo.scorer_digests(
        session, principal.project_id, check["scorer"]["name"]
    )
    keyids = {board.keyid} | {r["keyid"] for r in reports.values() if r["keyid"] is not None}
    target = tempfile.SpooledTemporaryFile(max_size=IN_MEMORY)  # noqa: SIM115
    writer = _Writer(target)
    header = {
        "kind": "header",
        "format": BOARD_FORMAT,
        "board_id": str(board.id),
        "board_digest": board.digest,
        "created_at": timestamp(datetime.now(UTC)),
        "producer": {"service_version": __version__},
        "keys": await _keys(session, keyids),
    }
    writer.write(line(header))
    board_line: dict[str, Any] = {
        "kind": "board",
        "digest": board.digest,
        "body": raw(board.body),
        "attestation": raw(canonical_bytes(orjson.loads(board.envelope))),
    }
    logged = await _board_log(reader, log, board.id)
    if logged is not None:
        board_line["log"] = logged
    writer.write(line(board_line))
    writer.write(
        line({"kind": "suite_version", "digest": suite.digest, "content": raw(suite.content)})
    )
    await _write_reports(writer, reader, board, entries, reports, scorer_digests)
    writer.close()
    return _sealed(target)
