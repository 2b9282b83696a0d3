"""SLSA Verification Summary Attestations: what the current reports say about a subject, each
as one signed document a release gate can keep as its evidence."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from app.digest.canonical import timestamp
from app.digest.signing import VSA_PREDICATE, envelope, statement
from app.domain.errors import InternalError
from app.identity.auth import Principal
from app.platform.db import ReadConnection
from app.repositories import reads
from app.schemas.report_queries import ForSubjectQuery
from app.services import reports
from app.services.signing import Signer


def vsa_predicate(
    body: dict[str, Any], base: str, attestation_digest: str | None, now: str
) -> dict[str, Any]:
    """The VSA v1 predicate of one report: PASSED only for result pass."""
    passed = body["result"] == "pass"
    suite = body["suite_ref"]
    report_api = f"{base}/evaluations/api/reports/{body['report_id']}"
    predicate: dict[str, Any] = {
        "verifier": {"id": base},
        "timeVerified": now,
        "resourceUri": body["subject"]["digest"],
        "policy": {
            "uri": f"{base}/api/v1/suites/{suite['name']}/versions/{suite['version']}",
            "digest": {"sha256": suite["digest"].removeprefix("sha256:")},
        },
        "inputAttestations": []
        if attestation_digest is None
        else [
            {
                "uri": f"{report_api}/attestation",
                "digest": {"sha256": attestation_digest.removeprefix("sha256:")},
            }
        ],
        "verificationResult": "PASSED" if passed else "FAILED",
        # SLSA VSA v1: a failed verification's levels are ["FAILED"]; a passed one names the
        # assurance its cases carry.
        "verifiedLevels": (
            [f"EVALBOOK_ASSURANCE_{str(body['assurance']).upper()}"] if passed else ["FAILED"]
        ),
    }
    return predicate


async def for_subject(
    reader: ReadConnection,
    principal: Principal,
    query: ForSubjectQuery,
    public_base_url: str,
    signer: Signer,
) -> bytes:
    """`{"subject_digest", "attestations": [a DSSE envelope per current report]}`."""
    now = datetime.now(UTC)
    subject_digest = query.digest
    views = await reports.current_for_subject(reader, principal, query, now)
    keyid = await reads.active_keyid(reader)
    if keyid is None:
        raise InternalError("no active signing key")
    key = signer.private(keyid)
    digests = await reads.attestation_digests(reader, [v.id for v in views])
    stamp = timestamp(now)
    base = public_base_url.rstrip("/")
    envelopes = []
    for view in views:
        body = orjson.loads(view.body)
        predicate = vsa_predicate(body, base, digests.get(view.id), stamp)
        envelopes.append(envelope(statement(VSA_PREDICATE, predicate, body["subject"]), key))
    return (
        b'{"subject_digest":'
        + orjson.dumps(subject_digest)
        + b',"attestations":['
        + b",".join(envelopes)
        + b"]}"
    )
