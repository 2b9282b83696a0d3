"""The conformance set's test-result cases (`make conformance-bundles`; alone: python -m
tests.bundles.generate_test_result).

On an embedded PostgreSQL, generate_log's run (its own signing key) gives a current report's
bundle, which carries the signed in-toto test-result statement beside the report's own. Each
`test_result_*_fail` case is one edit of it (trailer recomputed): a statement that says other
than the body, signed again with the service's own key; one naming another service's pages,
signed again likewise; one signed by a forger's key added to the header. Removing the
statement leaves a bundle that passes with the statement not proven."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.digest.signing import envelope, load_private_key
from app.formats.test_result import test_result_statement
from tests.bundles.edits import Lines, edit, gz, kind, reseal
from tests.bundles.generate import scratch_database, write_case
from tests.bundles.generate_log import build

Change = Callable[[dict[str, Any]], None]
FORGER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))


def _report(lines: Lines, change: Change) -> bytes:
    return gz(reseal(edit(lines, kind("report"), change)))


def _resigned(key_file: Path, statement: Callable[[dict[str, Any]], bytes]) -> Change:
    """The report line's test-result statement replaced by `statement(report line)`, signed
    with the service's own key."""

    def change(value: dict[str, Any]) -> None:
        value["test_result"] = orjson.loads(envelope(statement(value), load_private_key(key_file)))

    return change


def _says_passed(value: dict[str, Any]) -> bytes:
    """The statement of a report that passed every check (what an insider would wish)."""
    statement = orjson.loads(base64.b64decode(value["test_result"]["payload"]))
    predicate = statement["predicate"]
    tests = predicate["passedTests"] + predicate["warnedTests"] + predicate["failedTests"]
    predicate.update(result="PASSED", passedTests=tests, warnedTests=[], failedTests=[])
    return orjson.dumps(statement)


def _elsewhere(value: dict[str, Any]) -> bytes:
    """The report's statement with another service's pages."""
    return test_result_statement(value["body"], "https://elsewhere.example", value["digest"])


def _forger_signed(value: dict[str, Any]) -> None:
    """The genuine statement signed again by a forger whose key is in the header."""
    payload = base64.b64decode(value["test_result"]["payload"])
    value["test_result"] = orjson.loads(envelope(payload, FORGER))


def _with_forger_key(lines: Lines) -> Lines:
    raw = FORGER.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    entry = {
        "keyid": "sha256:" + hashlib.sha256(raw).hexdigest(),
        "alg": "ed25519",
        "public_key": base64.b64encode(raw).decode(),
        "status": "active",
        "created_at": "2026-12-05T00:00:00.000000Z",
        "retired_at": None,
    }
    return edit(lines, kind("header"), lambda v: v["keys"].append(entry))


def cases(lines: Lines, key_file: Path) -> dict[str, tuple[bytes, int, list[str], str]]:
    """name -> (file bytes, exit status, failure codes, what it tests)."""
    return {
        "test_result_pass": (
            gz(lines),
            0,
            [],
            "A current report's bundle with its signed in-toto test-result statement: signed by the report's signer, and exactly what the body and the envelope's page say.",
        ),
        "test_result_removed_pass": (
            _report(lines, lambda v: v.pop("test_result")),
            0,
            [],
            "The test-result statement removed (trailer recomputed): the report still verifies; the statement is reported as not proven.",
        ),
        "test_result_says_passed_fail": (
            _report(lines, _resigned(key_file, _says_passed)),
            1,
            ["test_result"],
            "The insider's edit: a statement saying every test passed, signed again with the service's own key. It does not say what the report body says.",
        ),
        "test_result_elsewhere_fail": (
            _report(lines, _resigned(key_file, _elsewhere)),
            1,
            ["test_result"],
            "The report's statement rebuilt with another service's pages, signed again with the service's own key: it does not name the page the report's envelope gives.",
        ),
        "test_result_forger_key_fail": (
            gz(reseal(edit(_with_forger_key(lines), kind("report"), _forger_signed))),
            1,
            ["test_result"],
            "The genuine statement signed again by a forger whose key is added to the header: it is not signed by the report's signer.",
        ),
    }


def main() -> None:
    """Write the test-result cases into tests/bundles/."""
    with scratch_database("evalbook-test-result-") as (work, url):
        _, newer, settings = asyncio.run(build(work, url))
        assert settings.signing_key_file is not None
        assert b'"test_result":' in newer[1]
        made = cases(newer, settings.signing_key_file)
    for name, (data, status, codes, readme) in made.items():
        write_case(name, data, status, codes, readme)


if __name__ == "__main__":
    main()
