"""Signing a report: the in-toto statement built around the body's canonical bytes, its DSSE
envelope (Ed25519), for report bodies of the aggregation bench's sizes. Target: < 2 ms."""

from __future__ import annotations

import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.aggregation.engine import aggregate
from app.digest.canonical import canonical_and_digest
from app.digest.signing import envelope, report_statement
from bench.aggregate import inputs
from bench.common import table

ROUNDS = 200


def main() -> None:
    """Time statement + envelope per report, for a 20-check body and a 1-check one."""
    key = Ed25519PrivateKey.generate()
    body = {"subject": {"digest": "sha1:" + "ab" * 20}, **aggregate(inputs("threshold")).body}
    small = {**body, "checks": body["checks"][:1]}
    rows = []
    for name, candidate in (("20 checks", body), ("1 check", small)):
        body_bytes, digest = canonical_and_digest(candidate)
        started = time.perf_counter()
        for _ in range(ROUNDS):
            envelope(report_statement(body_bytes, "r", digest, candidate["subject"]), key)
        each = (time.perf_counter() - started) / ROUNDS
        rows.append([name, f"{len(body_bytes):,}", f"{each * 1000:.3f}", "< 2 ms"])
    print(table(["report body", "body bytes", "ms to sign", "target"], rows))


if __name__ == "__main__":
    main()
