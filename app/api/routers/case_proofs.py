"""One case of an issued report, with the RFC 6962 audit path that proves it."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from app.api.access import ReportReader
from app.api.deps import CaseTrees, Incidents, Reader
from app.api.routers.route import EdgeRoute
from app.domain.identifiers import IDENTIFIER_PATTERN
from app.schemas.case_proofs import CaseProof
from app.schemas.problems import AUTHENTICATED, problems
from app.services import case_proofs as service

router = APIRouter(
    prefix="/evaluations/api", tags=["reports"], route_class=EdgeRoute, responses=AUTHENTICATED
)


@router.get(
    "/reports/{report_id:uuid}/cases/{check_id}/{example_id}/{repeat}",
    response_model=CaseProof,
    responses=problems(404, 409),
)
async def case_proof(
    report_id: uuid.UUID,
    check_id: Annotated[str, Path(pattern=IDENTIFIER_PATTERN, max_length=200)],
    example_id: Annotated[str, Path(pattern=IDENTIFIER_PATTERN, max_length=200)],
    repeat: Annotated[int, Path(ge=0, le=1_000_000)],
    principal: ReportReader,
    reader: Reader,
    trees: CaseTrees,
    incidents: Incidents,
    baseline: Annotated[bool, Query(description="prove the baseline's case")] = False,
) -> Response:
    """A case's record, leaf index, tree size and audit path against the report's cases root
    (the output too, with dataset.read_body)."""
    return Response(
        content=await service.case_proof(
            reader,
            principal,
            trees,
            report_id,
            check_id,
            example_id,
            repeat,
            baseline=baseline,
            incidents=incidents,
        ),
        media_type="application/json",
    )
