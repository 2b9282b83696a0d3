"""The report line's in-toto test-result attestation: signed by the report's signer, and
saying exactly what the report body says (rebuilt from the body and the report's page, which
the report line's envelope names)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from app.bundles.results import Finding, NotProven, Proven, failure
from app.bundles.signature import Trust, envelope_problem, first_signer
from app.formats.test_result import base_of, test_result_statement

if TYPE_CHECKING:
    from app.bundles.facts import Facts

NO_TEST_RESULT = "test result: the signed report carries no test-result attestation"


def _page(envelope: Any) -> Any:
    """The page the report line's envelope names, or None."""
    return envelope.get("url") if type(envelope) is dict else None


def settle_test_result(
    facts: Facts, trust: Trust, signer: dict[str, object] | None
) -> Iterator[Finding]:
    """Prove the test-result statement is the report's, signed by whoever signed the report."""
    line_no = facts.report_line
    envelope = facts.test_result
    if envelope is None:
        if facts.attestation is not None:
            yield NotProven(NO_TEST_RESULT)
        return
    problem = envelope_problem(envelope)
    if problem is not None:
        yield failure(line_no, "test_result", problem.replace("attestation", "test result"))
        return
    payload = base64.b64decode(envelope["payload"])
    body = facts.body
    # The statement names the report's page, which the report line's envelope gives.
    base = base_of(_page(facts.envelope), str(body["report_id"]))
    if base is None:
        yield failure(line_no, "test_result", "the report's envelope names no page of this report")
        return
    try:
        expected = test_result_statement(body, base, facts.body_digest)
    except (KeyError, TypeError, AttributeError):  # a body no report has: nothing it could say
        expected = None
    if payload != expected:
        yield failure(
            line_no, "test_result", "the test-result statement does not say what the report says"
        )
        return
    signed = first_signer(facts, trust, envelope, payload)
    if signed is None:
        yield failure(
            line_no, "test_result", "the test-result statement's signature does not verify"
        )
        return
    if signer is not None and signed[0] != signer["keyid"]:
        yield failure(
            line_no,
            "test_result",
            f"signed by {signed[0]}, not by the report's signer {signer['keyid']}",
        )
        return
    yield Proven("test_result")
