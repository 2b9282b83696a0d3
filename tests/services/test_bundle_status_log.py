"""A bundle's status rests on the log: each supersession statement it carries has its logged
entry, proven in the newest checkpoint it carries; "current when exported" is said to be
unproven offline, and `--log URL` proves it (or finds the supersession a bundle leaves out).
The owner's attacks: a swap re-signed with the service's key, statements stripped and the
envelope set current, a bent proof; both verifiers answer alike."""

from __future__ import annotations

import asyncio
import base64
import gzip
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from fastapi import FastAPI

from app.api.main import create_app
from app.bundles.log_status import UNPROVEN_CURRENT
from app.platform.config import Settings
from tests.bundle_helpers import download, export, lines_of
from tests.bundles.edits import edit, kind, reseal
from tests.bundles.generate_log import swap_resigned
from tests.conftest import Project
from tests.factories import define_suite, finished
from tests.served import uvicorn_serving
from tests.services.test_transparency import fresh_checkpoint
from tests.services.test_transparency_bundles import both


def rewritten(path: Path, target: Path, change: Any) -> Path:
    """The bundle with its report line changed by `change`, resealed."""
    lines = gzip.decompress(path.read_bytes()).splitlines()
    target.write_bytes(
        gzip.compress(b"\n".join(reseal(edit(lines, kind("report"), change))) + b"\n")
    )
    return target


def _failures(outcome: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["code"], f["what"]) for f in outcome["failures"]]


async def test_a_bundles_status_rests_on_the_log(
    project: Project, client: httpx.AsyncClient, app: FastAPI, settings: Settings, tmp_path: Path
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    older = await finished(client, headers)
    newer = await finished(client, headers)
    tree = await fresh_checkpoint(app, client)
    paths = {}
    for name, report in (("older", older), ("newer", newer)):
        record = await export(client, headers, report["report_id"])
        paths[name] = await download(client, headers, record["bundle_id"], tmp_path / f"{name}.gz")
    logged = lines_of(paths["older"])[1]["log"]["supersessions"]
    assert [item["entry"]["superseded_report_id"] for item in logged] == [older["report_id"]]

    code, outcome = both(paths["older"])
    assert code == 0 and outcome["proven"]["supersession_log"] == 1, outcome
    code, outcome = both(paths["newer"])
    assert code == 0 and outcome["proven"]["supersession_log"] == 1, outcome
    assert outcome["status"] == "current when exported"
    assert outcome["not_proven"][UNPROVEN_CURRENT] == 1

    # The owner swaps the two: the newer said superseded by the older, in a statement signed
    # again with the service's own key. No logged entry stands for it.
    swapped = rewritten(
        paths["newer"],
        tmp_path / "swapped.gz",
        swap_resigned(settings.signing_key_file),  # type: ignore[arg-type]
    )
    code, outcome = both(swapped)
    assert code == 1, outcome
    assert _failures(outcome) == [("log", "a supersession statement has no entry in the log")]

    # A supersession's inclusion proof bent: refused.
    def bend(value: dict[str, Any]) -> None:
        item = value["log"]["supersessions"][0]
        item["inclusion_proof"][0] = base64.b64encode(bytes(32)).decode()

    if logged[0]["inclusion_proof"]:
        bent = rewritten(paths["older"], tmp_path / "bent.gz", bend)
        code, outcome = both(bent)
        assert code == 1 and _failures(outcome) == [
            ("log", "a supersession's inclusion proof does not lead to the root")
        ], outcome

    # The statement stripped but its logged entry kept: the bundle contradicts itself.
    unstated = rewritten(
        paths["older"], tmp_path / "unstated.gz", lambda value: value.pop("supersessions")
    )
    code, outcome = both(unstated)
    assert code == 1 and _failures(outcome) == [
        ("log", "a logged supersession the bundle carries no statement of")
    ], outcome
    # The statement kept but its signer not trusted: that, and only that, is said.
    stranger = base64.b64encode(
        Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    ).decode()
    code, outcome = both(paths["older"], "--key", stranger)
    assert code == 1 and {c for c, _ in _failures(outcome)} == {"untrusted"}, outcome

    # The older one's statements and logged entries stripped, its envelope set current:
    # offline that is only "not proven"; the served log finds the supersession.
    def strip(value: dict[str, Any]) -> None:
        value.pop("supersessions")
        value["log"].pop("supersessions")
        value["envelope"].update(
            status="current",
            superseded_by=None,
            superseded_at=None,
            superseded_reason=None,
            supersession_attestation=None,
        )

    stripped = rewritten(paths["older"], tmp_path / "stripped.gz", strip)
    code, outcome = both(stripped)
    assert code == 0 and outcome["not_proven"][UNPROVEN_CURRENT] == 1, outcome
    async with uvicorn_serving(create_app(settings)) as port:
        url = f"http://127.0.0.1:{port}/log"
        # In a thread: the served app answers on this test's event loop.
        code, outcome = await asyncio.to_thread(both, stripped, "--log", url)
        assert code == 1, outcome
        ((code_name, what),) = _failures(outcome)
        assert code_name == "supersession" and "the bundle leaves out" in what
        code, outcome = await asyncio.to_thread(both, paths["newer"], "--log", url)
        assert code == 0, outcome
        assert (
            outcome["status"]
            == f"current when exported (proven in the log up to {tree.size} entries)"
        )
        assert outcome["proven"]["current"] == 1 and UNPROVEN_CURRENT not in outcome["not_proven"]
    # A log that does not answer: a failure both verifiers word alike.
    code, outcome = both(paths["newer"], "--log", "http://127.0.0.1:9/log")
    assert code == 1 and [c for c, _ in _failures(outcome)] == ["log"], outcome
