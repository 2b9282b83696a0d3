"""A bundle carries the report's place in the transparency log; both verifiers check the
checkpoint's signature (`--log-key`, or the bundle's own key, not trusted), that the entry
names this report, the inclusion proof, and the witnesses' cosignatures (`--witness-key`,
`--min-witnesses`)."""

from __future__ import annotations

import asyncio
import base64
import gzip
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from app.api.state import state_of
from app.digest.signing import load_private_key
from app.tlog import note
from tests.bundle_helpers import download, export, issue, lines_of, node_verify, python_verify
from tests.bundles.edits import edit, kind, reseal
from tests.conftest import Project, witness_vkey
from tests.factories import define_suite, suite_body
from tests.services.test_transparency import _cases, fresh_checkpoint


def _lines(bundle: Path) -> list[bytes]:
    return gzip.decompress(bundle.read_bytes()).rstrip(b"\n").split(b"\n")


def _bad_line_beside(report: dict[str, Any]) -> None:
    """A second signature line under the log's name and key id, its signature bytes wrong."""
    checkpoint = report["log"]["checkpoint"]
    _, signatures = note.split(checkpoint.encode())
    ours = signatures[0]
    bad = note.Signature(ours.name, ours.data[:4] + bytes(64))
    report["log"]["checkpoint"] = checkpoint + bad.line()


def _arabic_indic_size(key_file: Path) -> Callable[[dict[str, Any]], None]:
    """The checkpoint's size in Arabic-Indic digits, signed with the log's own key (so only
    the reading of the size can refuse it)."""

    def change(report: dict[str, Any]) -> None:
        text, signatures = note.split(report["log"]["checkpoint"].encode())
        lines = text.split("\n")
        lines[1] = "".join(chr(0x0660 + int(d)) for d in lines[1])
        text = "\n".join(lines)
        name = signatures[0].name
        signed = note.signed_note(text, [note.sign(text, name, load_private_key(key_file))])
        report["log"]["checkpoint"] = signed.decode()

    return change


def _codes(outcome: dict[str, object]) -> set[str]:
    return {f["code"] for f in outcome["failures"]}  # type: ignore[index,union-attr]


def both(bundle: Path, *args: str) -> tuple[int, dict[str, object]]:
    """Both verifiers, which must agree; Python's outcome."""
    python_code, python_outcome = python_verify(bundle, *args)
    node_code, node_outcome = node_verify(bundle, *args)
    assert python_code == node_code, (python_outcome, node_outcome)
    for key in ("failures", "proven", "not_proven", "log"):
        assert python_outcome[key] == node_outcome[key], (key, python_outcome, node_outcome)
    return python_code, python_outcome


async def test_bundles_prove_the_log(
    project: Project,
    client: httpx.AsyncClient,
    app: FastAPI,
    witness_key: Path,
    log_key_file: Path,
    tmp_path: Path,
) -> None:
    headers = await project.admin()
    await define_suite(client, headers, body=suite_body())
    report = await issue(client, headers, _cases())
    log = state_of(app).transparency
    # Exported before any checkpoint covers the entry: said so, and refused when demanded.
    early = await download(
        client,
        headers,
        (await export(client, headers, report["report_id"]))["bundle_id"],
        tmp_path / "early.jsonl.gz",
    )
    if lines_of(early)[1]["log"]["checkpoint"] is None:
        code, outcome = both(early)
        assert (
            code == 0
            and "log: no checkpoint covered the entry when exported" in outcome["not_proven"]
        )  # type: ignore[operator]
        code, outcome = both(early, "--min-witnesses", "1")
        assert code == 1 and _codes(outcome) == {"log"}
    await fresh_checkpoint(app, client)
    latest = await log.checkpoint()
    assert latest is not None
    text = note.split(latest[2])[0]
    key = load_private_key(witness_key)
    cosigned = note.signed_note(text, [note.cosign(text, "witness.test", key, int(time.time()))])
    assert (
        await client.post("/log/cosignatures", json={"note": cosigned.decode()})
    ).status_code == 200
    bundle = await download(
        client,
        headers,
        (await export(client, headers, report["report_id"]))["bundle_id"],
        tmp_path / "b.jsonl.gz",
    )
    logged = lines_of(bundle)[1]["log"]
    assert logged["entry"]["report_id"] == report["report_id"]
    log_vkey = (await client.get("/.well-known/evalbook/keys")).json()["log"]["vkey"]
    witness = witness_vkey(witness_key)
    code, outcome = both(bundle)
    assert code == 0 and outcome["log"]["trusted"] is False, outcome  # type: ignore[index]
    code, outcome = both(
        bundle, "--log-key", log_vkey, "--witness-key", witness, "--min-witnesses", "1"
    )
    assert code == 0, outcome
    assert outcome["log"] == {
        "index": logged["index"],
        "tree_size": latest[0],
        "trusted": True,
        "witnesses": 1,
    }
    code, outcome = both(bundle, "--witness-key", witness, "--min-witnesses", "2")
    assert code == 1 and _codes(outcome) == {"witnesses"}
    # The log grows past the witnessed checkpoint: a bundle exported now still carries a
    # witnessed one (and the newest, proven consistent with it), so --min-witnesses holds.
    await issue(client, headers, _cases())
    await fresh_checkpoint(app, client)
    grown = await download(
        client,
        headers,
        (await export(client, headers, report["report_id"]))["bundle_id"],
        tmp_path / "grown.jsonl.gz",
    )
    carried = lines_of(grown)[1]["log"]
    assert carried["newest"] is not None and carried["checkpoint"].count("\u2014 witness.test ")
    strict = ("--log-key", log_vkey, "--witness-key", witness, "--min-witnesses", "1")
    code, outcome = both(grown, *strict)
    assert code == 0, outcome
    assert outcome["log"]["witnesses"] == 1  # type: ignore[index]

    def bend(report_line: dict[str, Any]) -> None:
        proof = report_line["log"]["newest"]["consistency_proof"]
        proof[0] = base64.b64encode(bytes(32)).decode()

    bent = tmp_path / "bent.jsonl.gz"
    bent.write_bytes(
        gzip.compress(b"\n".join(reseal(edit(_lines(grown), kind("report"), bend))) + b"\n")
    )
    code, outcome = both(bent, *strict)
    assert code == 1 and _codes(outcome) == {"log"}, outcome
    assert "not consistent with the witnessed one" in str(outcome["failures"])

    # A forger's bad line under the log's own name and key id beside the good one, and a
    # checkpoint whose size is written in other digits: both verifiers refuse each alike.
    digits = _arabic_indic_size(log_key_file)
    for name, forge in (("bad_line", _bad_line_beside), ("digits", digits)):
        forged = tmp_path / f"{name}.jsonl.gz"
        forged.write_bytes(
            gzip.compress(b"\n".join(reseal(edit(_lines(bundle), kind("report"), forge))) + b"\n")
        )
        code, outcome = both(forged, "--log-key", log_vkey)
        assert code == 1 and _codes(outcome) & {"log", "untrusted"}, (name, outcome)
    stranger = note.Verifier("evalbook.test/log", bytes(32)).vkey()
    code, outcome = both(bundle, "--log-key", stranger)
    assert code == 1 and _codes(outcome) == {"untrusted"}
    # Python and Node print the same line for it.
    import subprocess
    import sys

    from tests.bundle_helpers import NODE, NODE_VERIFIER, REPO

    for command in (
        [sys.executable, "-m", "app.cli.main", "verify-bundle", str(bundle), "--log-key", log_vkey],
        [*NODE, str(NODE_VERIFIER), str(bundle), "--log-key", log_vkey],
    ):
        done = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, cwd=REPO, check=False
        )
        assert (
            f"log: entry {logged['index']} of {latest[0]} (checkpoint trusted; 0 witness cosignature(s))"
            in done.stdout
        )
