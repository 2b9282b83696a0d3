"""Scorer, dataset and suite versions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response, status
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, require
from app.db import get_session
from app.routers.body import body_doc, is_ndjson, json_body, ndjson_values, validate
from app.routers.deps import settings_of
from app.schemas.common import IDENTIFIER_PATTERN
from app.schemas.definitions import (
    ActivationOut,
    DatasetVersionIn,
    DatasetVersionOut,
    ExampleIn,
    ScorerVersionIn,
    ScorerVersionOut,
    SuiteOut,
    SuiteVersionIn,
    SuiteVersionOut,
)
from app.services import definitions as service

router = APIRouter(prefix="/api/v1", tags=["definitions"])
Name = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description="an identifier")]
Session = Depends(get_session, scope="function")

SCORER_EXAMPLE = {"definition": {"kind": "exact"}, "score_range": None}
DATASET_EXAMPLE = {"examples": [{"id": "e00", "body": {"q": "2+2?"}, "tags": ["lang:en"]}]}
SUITE_EXAMPLE = {
    "validity_hours": 168,
    "decision_rule": {"rule": "threshold", "alpha": 0.05, "margin": 0, "correction": "none"},
    "checks": [
        {
            "check_id": "accuracy",
            "required": True,
            "scorer": {"name": "exact-match", "version": "1"},
            "dataset": {"name": "qa", "version": "1"},
            "repeats": 1,
            "aggregation": {"method": "pass_rate", "threshold": 0.9},
            "min_coverage": 1.0,
            "min_samples": 1,
            "slices": [{"name": "german", "tag": "lang:de", "required": True, "threshold": 0.85}],
        }
    ],
}


@router.put(
    "/scorers/{name}/versions/{version}",
    response_model=ScorerVersionOut,
    openapi_extra=body_doc(ScorerVersionIn, example=SCORER_EXAMPLE),
    responses={201: {"model": ScorerVersionOut}},
)
async def put_scorer(
    request: Request,
    response: Response,
    name: Name,
    version: Name,
    principal: Principal = Depends(require("scorer.write")),
    session: AsyncSession = Session,
) -> ScorerVersionOut:
    """Register a scorer version (201); the same content again answers 200, other content 409."""
    body = validate(
        ScorerVersionIn, await json_body(request, settings_of(request).max_json_body_bytes)
    )
    answer, created = await service.put_scorer(session, principal, name, version, body)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return answer


@router.get("/scorers/{name}/versions/{version}", response_model=ScorerVersionOut)
async def get_scorer(
    name: Name,
    version: Name,
    principal: Principal = Depends(require("report.read")),
    session: AsyncSession = Session,
) -> ScorerVersionOut:
    """Read a scorer version back."""
    return service.scorer_out(await service.get_scorer(session, principal, name, version))


@router.delete("/scorers/{name}/versions/{version}", response_model=ScorerVersionOut)
async def retire_scorer(
    name: Name,
    version: Name,
    principal: Principal = Depends(require("scorer.write")),
    session: AsyncSession = Session,
) -> ScorerVersionOut:
    """Retire a scorer version: kept for reports, unavailable for new suites and bundles."""
    return await service.retire_scorer(session, principal, name, version)


@router.put(
    "/datasets/{name}/versions/{version}",
    response_model=DatasetVersionOut,
    response_model_exclude_none=True,
    openapi_extra=body_doc(DatasetVersionIn, ndjson_item=ExampleIn, example=DATASET_EXAMPLE),
    responses={201: {"model": DatasetVersionOut}},
)
async def put_dataset(
    request: Request,
    response: Response,
    name: Name,
    version: Name,
    principal: Principal = Depends(require("dataset.write")),
    session: AsyncSession = Session,
) -> DatasetVersionOut:
    """Register a dataset version from JSON or NDJSON (one example a line)."""
    settings = settings_of(request)
    if is_ndjson(request):
        examples = [
            validate(ExampleIn, value, (f"line {number}",)).model_dump()
            async for number, value in ndjson_values(request, settings.max_ndjson_line_bytes)
        ]
        body = validate(DatasetVersionIn, {"examples": examples})
    else:
        body = validate(DatasetVersionIn, await json_body(request, settings.max_json_body_bytes))
    answer, created = await service.put_dataset(session, principal, name, version, body)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return answer


@router.get(
    "/datasets/{name}/versions/{version}",
    response_model=DatasetVersionOut,
    response_model_exclude_unset=True,
)
async def get_dataset(
    name: Name,
    version: Name,
    principal: Principal = Depends(require("report.read")),
    session: AsyncSession = Session,
) -> DatasetVersionOut:
    """Read a dataset version with its examples (bodies with dataset.read_body)."""
    return await service.get_dataset(session, principal, name, version)


@router.put(
    "/suites/{name}/versions/{version}",
    response_model=SuiteVersionOut,
    openapi_extra=body_doc(SuiteVersionIn, example=SUITE_EXAMPLE),
    responses={201: {"model": SuiteVersionOut}},
)
async def put_suite_version(
    request: Request,
    response: Response,
    name: Name,
    version: Name,
    principal: Principal = Depends(require("suite.write")),
    session: AsyncSession = Session,
) -> SuiteVersionOut:
    """Freeze and digest a suite version (a suite's first version becomes active)."""
    body = validate(
        SuiteVersionIn, await json_body(request, settings_of(request).max_json_body_bytes)
    )
    answer, created = await service.put_suite_version(session, principal, name, version, body)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return answer


@router.get("/suites/{name}/versions/{version}", response_model=SuiteVersionOut)
async def get_suite_version(
    name: Name,
    version: Name,
    principal: Principal = Depends(require("report.read")),
    session: AsyncSession = Session,
) -> SuiteVersionOut:
    """Read a frozen suite version."""
    suite, suite_version = await service.find_suite_version(session, principal, name, version)
    return service.suite_version_out(suite, suite_version)


@router.get("/suites/{name}", response_model=SuiteOut)
async def get_suite(
    name: Name,
    principal: Principal = Depends(require("report.read")),
    session: AsyncSession = Session,
) -> SuiteOut:
    """A suite with its versions and the active one."""
    return await service.get_suite(session, principal, name)


@router.post("/suites/{name}/versions/{version}/activate", response_model=ActivationOut)
async def activate_suite_version(
    name: Name,
    version: Name,
    principal: Principal = Depends(require("suite.write")),
    session: AsyncSession = Session,
) -> ActivationOut:
    """Make a version the suite's active one."""
    return await service.activate_suite_version(session, principal, name, version)
