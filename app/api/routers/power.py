"""Power: planning a run's size, and what a report's variance says a check would need."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.access import ReportReader
from app.api.deps import Reader
from app.api.routers.route import EdgeRoute, body_example
from app.schemas.power import PowerIn, PowerOut, ReportPowerOut
from app.schemas.problems import AUTHENTICATED, BODY, problems
from app.services import power as service

router = APIRouter(
    prefix="/evaluations/api", tags=["power"], route_class=EdgeRoute, responses=AUTHENTICATED
)


@router.post(
    "/power",
    response_model=PowerOut,
    responses=BODY,
    openapi_extra=body_example(
        {"method": "pass_rate", "baseline": 0.7, "effect": 0.05, "alpha": 0.05, "power": 0.8}
    ),
)
async def plan_run(body: PowerIn, principal: ReportReader) -> PowerOut:
    """Examples needed to detect an effect, one-sided (statsmodels' power formulas)."""
    return service.plan_run(body)


@router.get(
    "/reports/{report_id:uuid}/power", response_model=ReportPowerOut, responses=problems(404, 422)
)
async def report_power(
    report_id: uuid.UUID,
    principal: ReportReader,
    reader: Reader,
    check: Annotated[str, Query(min_length=1, max_length=401, description="check_id[/slice]")],
    effect: Annotated[
        float,
        Query(
            description="the difference to detect (not 0)", json_schema_extra={"not": {"const": 0}}
        ),
    ],
) -> ReportPowerOut:
    """Examples a check would need to detect `effect` at the variance the report observed."""
    return await service.report_power(reader, principal, report_id, check, effect)
