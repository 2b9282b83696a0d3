"""The integrity check's hashing of stored rows in batches: the leaves equal each case record's
leaf by hashlib, and a stored output is reported as forged whenever its digest is not exactly
`sha256:` and the hex of its SHA-256, whether the batch compares at once or one by one."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from app.digest import merkle
from app.services.case_integrity import leaves_and_outputs

SCORER = "sha256:" + "ab" * 32


def row(i: int, output: bytes | str | None, digest: str | None) -> dict[str, Any]:
    """A stored case row as the bundle's query returns it."""
    return {
        "example_id": f'e"{i}' if i % 7 == 3 else f"e{i:03d}",
        "repeat": i % 3,
        "status": "pass" if i % 2 else "fail",
        "score": None if i % 4 else i / 8,
        "output": output,
        "output_digest": digest,
        "trace_digest": None if i % 5 else "sha256:" + "cd" * 32,
        "evidence_refs": [] if i % 6 else [f"ref-{i}"],
        "assurance": "reported",
        "scorer_version": "1",
    }


def honest(count: int, text: bool = False) -> list[dict[str, Any]]:
    """Rows whose outputs hash to their digests (bytes, or text as the sweep reads them)."""
    rows = []
    for i in range(count):
        output = b'{"answer":%d}' % i
        digest = "sha256:" + hashlib.sha256(output).hexdigest()
        rows.append(row(i, output.decode() if text else output, digest))
    return rows


@pytest.mark.parametrize("text", [False, True])
def test_honest_rows_give_each_records_leaf_and_no_forgery(text: bool) -> None:
    rows = honest(40, text)
    leaves, forged = leaves_and_outputs(rows, {"1": SCORER})
    expected = b"".join(
        hashlib.sha256(
            b"\x00" + merkle.stored_case_record(r["example_id"], r["repeat"], r, SCORER)
        ).digest()
        for r in rows
    )
    assert leaves == expected and forged == []


@pytest.mark.parametrize(
    "tamper",
    [
        lambda r: r.update(output=b'{"answer":999}'),
        lambda r: r.update(output_digest="sha512:" + r["output_digest"][7:]),
        lambda r: r.update(output_digest=r["output_digest"][:-1] + "0"),
        lambda r: r.update(output_digest=r["output_digest"] + "00"),
    ],
)
def test_a_forged_output_or_digest_is_named(tamper: Any) -> None:
    rows = honest(40)
    tamper(rows[17])
    _, forged = leaves_and_outputs(rows, {"1": SCORER})
    assert forged == [f"{rows[17]['example_id']}/{rows[17]['repeat']}"]


def test_rows_without_an_output_or_digest_are_not_checked() -> None:
    rows = honest(10)
    rows[2]["output"] = None
    rows[3]["output_digest"] = None
    assert leaves_and_outputs(rows, {"1": SCORER})[1] == []
