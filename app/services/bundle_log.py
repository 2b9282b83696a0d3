"""The transparency log's part of a bundle (docs/bundles.md): the report's entry proven in a
witnessed checkpoint, the newest checkpoint consistent with it, and the logged supersessions
whose statements the bundle carries, proven in the newest."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import orjson

from app.platform.db import ReadConnection
from app.repositories import transparency as repo
from app.services.transparency import TransparencyLog, entry_and_proof
from app.tlog import tiles


async def bundle_log(
    connection: ReadConnection,
    log: TransparencyLog,
    report_id: uuid.UUID,
    superseded: list[uuid.UUID] | None = None,
) -> dict[str, Any] | None:
    """The report line's `log` of a bundle: the entry and its index; the newest checkpoint
    that covers it and holds at least `log_export_witnesses` cosignatures (else the newest),
    with the inclusion proof to it; and, when the log has grown past that one, the newest
    checkpoint with a consistency proof to it (`newest`). The entries of the supersessions of
    the `superseded` reports the bundle carries statements of, proven to the newest checkpoint
    (`supersessions`). The log's verifier key beside."""
    found = await entry_and_proof(connection, log, report_id)
    if found is None:
        return None
    tree_size = found.pop("tree_size", None)
    latest = await log.checkpoint(connection)
    need = log.settings.log_export_witnesses
    witnessed = None
    if latest is not None and need > 0 and found["index"] < latest[0]:
        witnessed = await repo.witnessed_checkpoint(connection, found["index"], need)
    elements = log.elements_on(connection)
    if latest is not None and witnessed is not None and witnessed["size"] < latest[0]:
        size = witnessed["size"]
        proof = await tiles.inclusion_proof(elements, found["index"], size)
        lines = await repo.cosignatures(connection, size)
        found["checkpoint"] = (bytes(witnessed["note"]) + "".join(lines).encode()).decode()
        found["inclusion_proof"] = [base64.b64encode(p).decode() for p in proof]
        consistency = await tiles.consistency_proof(elements, size, latest[0])
        found["newest"] = {
            "checkpoint": latest[2].decode(),
            "consistency_proof": [base64.b64encode(p).decode() for p in consistency],
        }
        tree_size = latest[0]
    if tree_size is not None and superseded:
        found["supersessions"] = await _supersession_entries(
            elements, connection, superseded, tree_size
        )
    return {**found, "key": log.key.verifier.vkey()}


async def _supersession_entries(
    elements: tiles.Elements,
    connection: ReadConnection,
    superseded: list[uuid.UUID],
    tree_size: int,
) -> list[dict[str, Any]]:
    """The logged supersessions of these reports, each with its inclusion proof in the tree of
    `tree_size` (null when that tree does not hold it yet)."""
    found = []
    for report_id in superseded:
        row = await repo.entry_of(connection, "supersession", report_id)
        if row is None:
            continue
        proof = None
        if row["idx"] < tree_size:
            path = await tiles.inclusion_proof(elements, row["idx"], tree_size)
            proof = [base64.b64encode(p).decode() for p in path]
        found.append(
            {
                "entry": orjson.Fragment(bytes(row["entry"])),
                "index": row["idx"],
                "inclusion_proof": proof,
            }
        )
    return found
