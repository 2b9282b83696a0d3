"""A bundle carries the report's place in the transparency log; both verifiers check the
checkpoint's signature (`--log-key`, or the bundle's own key, not trusted), that the entry
names this report, the inclusion proof, and the witnesses' cosignatures (`--witness-key`,
`--min-witnesses`)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from fastapi import FastAPI

from app.signing import load_private_key
from app.state import state_of
from app.tlog import note
from tests.bundle_helpers import download, export, issue, lines_of, node_verify, python_verify
from tests.conftest import Project, witness_vkey
from tests.factories import define_suite, suite_body
from tests.services.test_transparency import _cases, fresh_checkpoint


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
    stranger = note.Verifier("evalbook.test/log", bytes(32)).vkey()
    code, outcome = both(bundle, "--log-key", stranger)
    assert code == 1 and _codes(outcome) == {"untrusted"}
    # Python and Node print the same line for it.
    import subprocess
    import sys

    from tests.bundle_helpers import NODE, NODE_VERIFIER, REPO

    for command in (
        [sys.executable, "-m", "app.cli", "verify-bundle", str(bundle), "--log-key", log_vkey],
        [*NODE, str(NODE_VERIFIER), str(bundle), "--log-key", log_vkey],
    ):
        done = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, cwd=REPO, check=False
        )
        assert (
            f"log: entry {logged['index']} of {latest[0]} (checkpoint trusted; 0 witness cosignature(s))"
            in done.stdout
        )
