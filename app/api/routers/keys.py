"""The service's public signing keys, and a report's signed attestation."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from app.api.access import ReportReader
from app.api.deps import PublicURL, Session, State
from app.api.routers.route import EdgeRoute
from app.digest.signing import ENVELOPE_MEDIA_TYPE
from app.schemas.problems import AUTHENTICATED, problems
from app.schemas.signing import PublicKeys
from app.services import exports
from app.services import signing as service

router = APIRouter(tags=["signing"], route_class=EdgeRoute)
# Which statement `/attestation` serves; any other name is a 422 naming these.
AttestationPredicate = Annotated[
    Literal["report", "test-result"],
    Query(description="`report` (EvalBook's own statement) or `test-result` (in-toto's)"),
]


def envelope_responses(what: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI answers of an endpoint serving one DSSE envelope."""
    return {
        200: {
            "content": {ENVELOPE_MEDIA_TYPE: {"schema": {"type": "object"}}},
            "description": f"the DSSE envelope of {what}",
        },
        **AUTHENTICATED,
        **problems(404),
    }


@router.get("/.well-known/evalbook/keys", response_model=PublicKeys, responses=problems(500, 503))
async def public_keys(session: Session, state: State) -> PublicKeys:
    """Every key the service signs or signed with, and the log's note key (public halves; no
    token needed)."""
    return PublicKeys.model_validate(
        await service.public_keys(session, state.transparency.key.verifier)
    )


@router.get(
    "/evaluations/api/reports/{report_id:uuid}/attestation",
    responses=envelope_responses("the report's in-toto statement"),
)
async def report_attestation(
    report_id: uuid.UUID,
    principal: ReportReader,
    session: Session,
    public_url: PublicURL,
    state: State,
    predicate: AttestationPredicate = "report",
) -> Response:
    """The report's signed in-toto statement, in its DSSE envelope: the report itself
    (`report`, signed when it was issued) or its in-toto test result (`test-result`, for
    release policy engines)."""
    if predicate == "test-result":
        envelope = await exports.test_result_attestation(
            session, principal, report_id, public_url, state.signer
        )
    else:
        envelope = await service.report_attestation(session, principal, report_id)
    return Response(content=envelope, media_type=ENVELOPE_MEDIA_TYPE)


@router.get(
    "/evaluations/api/reports/{report_id:uuid}/supersession-attestation",
    responses=envelope_responses("the report's supersession statement"),
)
async def supersession_attestation(
    report_id: uuid.UUID, principal: ReportReader, session: Session
) -> Response:
    """The signed statement that this report was superseded (by whom, why, when)."""
    envelope = await service.supersession_attestation(session, principal, report_id)
    return Response(content=envelope, media_type=ENVELOPE_MEDIA_TYPE)
