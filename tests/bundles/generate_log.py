"""The conformance set's log cases (`make conformance-bundles`; alone: python -m
tests.bundles.generate_log).

On an embedded PostgreSQL: two reports of one subject and suite (the newer supersedes the older),
a checkpoint cut and cosigned by a witness, a third report of another subject and a newer
checkpoint. Both bundles then carry their entry proven in the witnessed checkpoint, the newest
checkpoint with a consistency proof to it, and the logged supersession each statement stands
for. Each `log_*_fail` case is one forger's edit of them (trailer recomputed), with the keys of
the run: a statement signed again with the service's own key, a checkpoint signed again with
the log's own key."""

from __future__ import annotations

import asyncio
import base64
import gzip
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.api.main import create_app
from app.api.state import state_of
from app.digest.signing import envelope, load_private_key, supersession_statement, write_private_key
from app.platform.config import Settings
from app.platform.db import reading
from app.repositories import transparency as log_repo
from app.services import projects
from app.services.provisioning import provision
from app.tlog import note
from tests.bundle_helpers import download, export
from tests.bundles.edits import Lines, edit, gz, kind, reseal
from tests.bundles.generate import scratch_database, write_case
from tests.factories import define_suite, finished

Change = Callable[[dict[str, Any]], None]


async def _covered(app: Any) -> bytes:
    """Cut until the newest checkpoint covers every entry; its note."""
    log = state_of(app).transparency
    for _ in range(200):
        await log.cut()
        latest = await log.checkpoint()
        async with reading(log.pool) as connection:
            size = await log_repo.size(connection)
        if latest is not None and latest[0] == size:
            return bytes(latest[2])
        await asyncio.sleep(0.05)
    raise AssertionError("no checkpoint covered the log")


async def build(work: Path, url: str) -> tuple[Lines, Lines, Settings]:
    """The older (superseded) and the newer (current) report's bundles."""
    for directory in ("signing", "log"):
        (work / directory).mkdir()
    witness = Ed25519PrivateKey.generate()
    witness_vkey = note.Verifier(
        "witness.example", note.raw(witness.public_key()), note.COSIGNATURE_V1
    ).vkey()
    settings = Settings(
        database_url=url,
        data_dir=work / "data",
        signing_key_file=write_private_key(work / "signing", Ed25519PrivateKey.generate()),
        log_key_file=write_private_key(work / "log", Ed25519PrivateKey.generate()),
        notifications_enabled=False,
        public_base_url="https://evalbook.example",
        log_witness_keys=[witness_vkey],
        log_checkpoint_seconds=3600,
    )
    await provision(url, settings)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://generate") as client:
            sessionmaker = app.state.resources.sessionmaker
            async with sessionmaker() as session, session.begin():
                project, _ = await projects.create_project(session, "acme/web")
                _, admin = await projects.create_token(
                    session, project.id, "release-bot", ["admin"], "runner", "platform_verified"
                )
            headers = {"Authorization": f"Bearer {admin}"}
            await define_suite(client, headers)
            older = await finished(client, headers)
            newer = await finished(client, headers)
            text = note.split(await _covered(app))[0]
            cosigned = note.signed_note(
                text, [note.cosign(text, "witness.example", witness, int(time.time()))]
            )
            posted = await client.post("/log/cosignatures", json={"note": cosigned.decode()})
            assert posted.status_code == 200, posted.text
            other = {"digest": "sha1:" + "9" * 40, "repo": "acme/web"}
            await finished(client, headers, subject=other)
            await _covered(app)
            bundles = []
            for report in (older, newer):
                record = await export(client, headers, report["report_id"])
                path = await download(
                    client, headers, record["bundle_id"], work / f"{record['bundle_id']}.gz"
                )
                bundles.append(path.read_bytes())
    older_lines, newer_lines = (gzip.decompress(b).splitlines() for b in bundles)
    assert orjson.loads(older_lines[1])["log"]["newest"] is not None
    return older_lines, newer_lines, settings


def _report(lines: Lines, change: Change) -> bytes:
    return gz(reseal(edit(lines, kind("report"), change)))


def swap_resigned(key_file: Path) -> Change:
    """The newer report said superseded by the older, in a statement signed again with the
    service's own key (the genuine statement's two reports swapped)."""

    def change(value: dict[str, Any]) -> None:
        (genuine,) = value["supersessions"]
        predicate = dict(orjson.loads(base64.b64decode(genuine["payload"]))["predicate"])
        for a, b in (
            ("superseded_report_id", "successor_report_id"),
            ("superseded_report_digest", "successor_report_digest"),
        ):
            predicate[a], predicate[b] = predicate[b], predicate[a]
        signed = envelope(
            supersession_statement(predicate, value["body"]["subject"]),
            load_private_key(key_file),
        )
        value["supersessions"] = [orjson.loads(signed)]
        value["log"].pop("supersessions")
        value["envelope"].update(
            status="superseded",
            superseded_by=predicate["successor_report_id"],
            superseded_at=predicate["at"],
            superseded_reason=predicate["reason"],
        )

    return change


def _bent_supersession_proof(value: dict[str, Any]) -> None:
    item = value["log"]["supersessions"][0]
    item["inclusion_proof"][0] = base64.b64encode(bytes(32)).decode()


def _early_supersession(value: dict[str, Any]) -> None:
    value["log"]["supersessions"][0]["index"] = value["log"]["index"]


def _bent_consistency(value: dict[str, Any]) -> None:
    value["log"]["newest"]["consistency_proof"][0] = base64.b64encode(bytes(32)).decode()


def _bad_line_beside(value: dict[str, Any]) -> None:
    checkpoint = value["log"]["checkpoint"]
    _, signatures = note.split(checkpoint.encode())
    ours = next(s for s in signatures if len(s.data) == 68)
    value["log"]["checkpoint"] = (
        checkpoint + note.Signature(ours.name, ours.data[:4] + bytes(64)).line()
    )


def _arabic_indic_size(key_file: Path) -> Change:
    def change(value: dict[str, Any]) -> None:
        text, signatures = note.split(value["log"]["checkpoint"].encode())
        lines = text.split("\n")
        lines[1] = "".join(chr(0x0660 + int(d)) for d in lines[1])
        text = "\n".join(lines)
        name = next(s for s in signatures if len(s.data) == 68).name
        value["log"]["checkpoint"] = note.signed_note(
            text, [note.sign(text, name, load_private_key(key_file))]
        ).decode()

    return change


def cases(older: Lines, newer: Lines, settings: Settings) -> dict[str, tuple[bytes, int, str]]:
    """name -> (file bytes, exit status, what it tests); every failure's code is `log`."""
    assert settings.signing_key_file is not None and settings.log_key_file is not None
    return {
        "log_superseded_pass": (
            gz(older),
            0,
            "A superseded report: its entry proven in a witnessed checkpoint, the newest checkpoint consistent with it, and its supersession statement's logged entry proven in the newest.",
        ),
        "log_current_pass": (
            gz(newer),
            0,
            "The current successor: its own entry and the logged supersession its statement names, proven. 'Current when exported' is reported as not proven offline.",
        ),
        "log_swapped_statement_fail": (
            _report(newer, swap_resigned(settings.signing_key_file)),
            1,
            "The insider's swap: the current report said superseded by the older one, in a statement signed again with the service's own key. No logged supersession stands for that statement.",
        ),
        "log_supersession_entry_dropped_fail": (
            _report(older, lambda v: v["log"].pop("supersessions")),
            1,
            "A superseded report's statement kept, the logged supersession it stands for removed from the bundle.",
        ),
        "log_unstated_supersession_fail": (
            _report(older, lambda v: v.pop("supersessions")),
            1,
            "A logged supersession kept, the statement it stands for removed: the bundle carries a supersession it gives no statement of.",
        ),
        "log_supersession_proof_fail": (
            _report(older, _bent_supersession_proof),
            1,
            "One node of a supersession entry's inclusion proof replaced: it no longer leads to the newest checkpoint's root.",
        ),
        "log_supersession_index_fail": (
            _report(older, _early_supersession),
            1,
            "A supersession's entry placed at the report's own index: a supersession is logged after the report it names.",
        ),
        "log_entry_digest_fail": (
            _report(newer, lambda v: v["log"]["entry"].update(report_digest="sha256:" + "0" * 64)),
            1,
            "The report's log entry names another report digest.",
        ),
        "log_newest_inconsistent_fail": (
            _report(older, _bent_consistency),
            1,
            "One node of the consistency proof from the witnessed checkpoint to the newest replaced.",
        ),
        "log_bad_signature_line_fail": (
            _report(newer, _bad_line_beside),
            1,
            "A second signature line under the log's own name and key id, its signature wrong, beside the good one: a note with a bad signature of its own key is refused.",
        ),
        "log_size_digits_fail": (
            _report(newer, _arabic_indic_size(settings.log_key_file)),
            1,
            "The checkpoint's size written in Arabic-Indic digits and signed again with the log's own key: sizes are ASCII digits only.",
        ),
    }


def main() -> None:
    """Write the log cases into tests/bundles/."""
    with scratch_database("evalbook-log-bundles-") as (work, url):
        older, newer, settings = asyncio.run(build(work, url))
    for name, (data, status, readme) in cases(older, newer, settings).items():
        write_case(name, data, status, [] if status == 0 else ["log"], readme)


if __name__ == "__main__":
    main()
