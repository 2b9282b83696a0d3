"""A report in the ecosystem's formats: Hugging Face's model-index and a CycloneDX ML-BOM (the
signed in-toto test result is `/attestation?predicate=test-result`)."""

from __future__ import annotations

import uuid
from typing import Literal

from fastapi import APIRouter, Response

from app.api.access import ReportReader
from app.api.deps import PublicURL, Session
from app.api.routers.route import EdgeRoute
from app.formats.cyclonedx import MEDIA_TYPE as CYCLONEDX
from app.schemas.problems import AUTHENTICATED, problems
from app.services import exports as service

router = APIRouter(
    prefix="/evaluations/api", tags=["exports"], route_class=EdgeRoute, responses=AUTHENTICATED
)
YAML = "application/yaml"
# The formats by name; any other is a 422 naming these.
ExportFormat = Literal["model-index", "cyclonedx"]


@router.get(
    "/reports/{report_id:uuid}/exports/{export_format}",
    responses={
        200: {
            "content": {
                YAML: {"schema": {"type": "object"}},
                CYCLONEDX: {"schema": {"type": "object"}},
            },
            "description": "`model-index`: YAML for a model card; `cyclonedx`: a CycloneDX 1.6 BOM",
        },
        **problems(404, 422),
    },
)
async def report_export(
    report_id: uuid.UUID,
    export_format: ExportFormat,
    principal: ReportReader,
    session: Session,
    public_url: PublicURL,
) -> Response:
    """The report in another format, linked back to it by its page and digest."""
    if export_format == "model-index":
        content = await service.model_index(session, principal, report_id, public_url)
        return Response(content=content, media_type=YAML)
    content = await service.cyclonedx(session, principal, report_id, public_url)
    return Response(content=content, media_type=CYCLONEDX)
