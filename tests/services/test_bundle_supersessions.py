"""A bundle proves its report's status when exported: it carries every signed supersession
statement naming the report, and both verifiers check them and say `superseded by <id> at
<time> (signed)` or `current when exported`, with the same exit and failures."""

from __future__ import annotations

import base64
import gzip
from pathlib import Path
from typing import Any

import httpx
import orjson
from securesystemslib.dsse import Envelope

from tests.bundle_helpers import download, export, node_verify, python_verify
from tests.bundles.edits import canonical, edit, kind, reseal
from tests.conftest import Project
from tests.factories import define_suite, finished
from tests.services.test_signing import sslib_key


def both(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """Both verifiers' exit and outcome; they must agree on exit, failures and status."""
    python_code, python_outcome = python_verify(path, *extra)
    node_code, node_outcome = node_verify(path, *extra)
    assert python_code == node_code, (python_outcome, node_outcome)
    assert python_outcome["status"] == node_outcome["status"]
    assert sorted((f["line"], f["code"], f["what"]) for f in python_outcome["failures"]) == sorted(
        (f["line"], f["code"], f["what"]) for f in node_outcome["failures"]
    )
    assert python_outcome["proven"] == node_outcome["proven"]
    return python_code, python_outcome


def rewritten(path: Path, target: Path, change: Any) -> Path:
    lines = gzip.decompress(path.read_bytes()).splitlines()
    target.write_bytes(gzip.compress(b"\n".join(reseal(change(lines))) + b"\n"))
    return target


async def test_a_superseded_report_and_its_successor_prove_their_status(
    project: Project, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    headers = await project.admin()
    await define_suite(client, headers)
    older = await finished(client, headers)
    newer = await finished(client, headers)
    paths = {}
    for name, report in (("older", older), ("newer", newer)):
        record = await export(client, headers, report["report_id"])
        paths[name] = await download(client, headers, record["bundle_id"], tmp_path / f"{name}.gz")
    code, outcome = both(paths["older"])
    assert code == 0, outcome
    assert outcome["status"].startswith(f"superseded by {newer['report_id']} at ")
    assert outcome["status"].endswith("(signed)") and outcome["proven"]["supersession"] == 1
    code, outcome = both(paths["newer"])
    assert code == 0 and outcome["status"] == "current when exported", outcome
    assert outcome["proven"]["supersession"] == 1
    # An implementation we did not write agrees: securesystemslib verifies the statement the
    # bundle carries with the key its header lists.
    lines = [
        orjson.loads(line) for line in gzip.decompress(paths["older"].read_bytes()).splitlines()
    ]
    (statement,) = next(v for v in lines if v["kind"] == "report")["supersessions"]
    keys = {entry["keyid"]: entry for entry in lines[0]["keys"]}
    (signature,) = statement["signatures"]
    keyid = signature["keyid"]  # from_dict takes the dict apart
    verified = Envelope.from_dict(statement).verify([sslib_key(keys[keyid])], 1)
    assert list(verified) == [keyid]

    # The statement removed, and its logged entry if the newest checkpoint already held it
    # (the cutter runs beside the test): the envelope's word alone is not proven. With the
    # entry kept, the missing statement is a contradiction (test_bundle_status_log).
    def drop_statements(value: dict[str, Any]) -> None:
        value.pop("supersessions")
        value.get("log", {}).pop("supersessions", None)

    dropped = rewritten(
        paths["older"],
        tmp_path / "dropped.gz",
        lambda lines: edit(lines, kind("report"), drop_statements),
    )
    code, outcome = both(dropped)
    assert code == 0, outcome
    assert outcome["status"] == "superseded when exported (no signed statement)"
    assert outcome["not_proven"]["status: superseded when exported, with no signed statement"] == 1

    # The envelope claims current while a signed statement says superseded.
    current = rewritten(
        paths["older"],
        tmp_path / "current.gz",
        lambda lines: edit(lines, kind("report"), lambda v: v["envelope"].update(status="current")),
    )
    code, outcome = both(current)
    assert code == 1 and "supersession" in [f["code"] for f in outcome["failures"]]

    # A forged statement (successor changed, signature kept) does not verify.
    def forge(value: dict[str, Any]) -> None:
        envelope = value["supersessions"][0]
        statement = orjson.loads(base64.b64decode(envelope["payload"]))
        statement["predicate"]["successor_report_id"] = "00000000-0000-4000-8000-000000000000"
        envelope["payload"] = base64.b64encode(canonical(statement)).decode()

    forged = rewritten(
        paths["older"], tmp_path / "forged.gz", lambda lines: edit(lines, kind("report"), forge)
    )
    code, outcome = both(forged)
    assert code == 1 and "signature" in [f["code"] for f in outcome["failures"]]
    # Supersessions that are not a list.
    scalar = rewritten(
        paths["older"],
        tmp_path / "scalar.gz",
        lambda lines: edit(lines, kind("report"), lambda v: v.update(supersessions={"x": 1})),
    )
    code, outcome = both(scalar)
    assert code == 1 and "supersession" in [f["code"] for f in outcome["failures"]]

    # A key given that did not sign the statements: untrusted, in both.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    stranger = base64.b64encode(
        Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    ).decode()
    code, outcome = both(paths["older"], "--key", stranger)
    assert code == 1 and {f["code"] for f in outcome["failures"]} == {"untrusted"}, outcome[
        "failures"
    ]
