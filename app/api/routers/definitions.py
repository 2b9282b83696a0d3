"""Scorer, dataset and suite versions."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Path, Request, Response, status

from app.api.access import DatasetWriter, ReportReader, ScorerWriter, SuiteWriter
from app.api.deps import AppSettings, Session, State
from app.api.routers.body import ndjson_values, validate
from app.api.routers.params import NamedPageQuery, PageLimit
from app.api.routers.route import EdgeRoute, NDJSONRoute, body_example
from app.domain.identifiers import IDENTIFIER_PATTERN
from app.schemas.common import Cursor
from app.schemas.definitions import (
    ActivationOut,
    DatasetList,
    DatasetVersionIn,
    DatasetVersionOut,
    ExampleIn,
    ScorerList,
    ScorerVersionIn,
    ScorerVersionOut,
    SuiteList,
    SuiteOut,
    SuiteVersionIn,
    SuiteVersionOut,
)
from app.schemas.problems import AUTHENTICATED, BODY, LISTED, problems
from app.services import definitions as service

router = APIRouter(
    prefix="/api/v1", tags=["definitions"], route_class=EdgeRoute, responses=AUTHENTICATED
)
# Registered before `router`: the NDJSON form of a dataset PUT, matched on its media type.
ndjson_router = APIRouter(prefix="/api/v1", route_class=NDJSONRoute, include_in_schema=False)
Name = Annotated[str, Path(pattern=IDENTIFIER_PATTERN, description="an identifier")]
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
T = TypeVar("T")
WRITE = {**problems(404, 409), **BODY, 201: {"description": "registered now"}}
READ = problems(404)


def _created(response: Response, answer: T, created: bool) -> T:
    """The answer, with 201 when it was registered now and 200 when it already was."""
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return answer


@router.get("/scorers", response_model=ScorerList, responses=LISTED)
async def list_scorers(
    principal: ReportReader, session: Session, page: NamedPageQuery
) -> ScorerList:
    """Scorer versions, newest first (`name` for the versions of one scorer)."""
    return await service.list_scorers(session, principal, page.name, page.limit, page.cursor)


@router.get("/datasets", response_model=DatasetList, responses=LISTED)
async def list_datasets(
    principal: ReportReader, session: Session, page: NamedPageQuery
) -> DatasetList:
    """Dataset versions, newest first, without their examples (`name`: one dataset's)."""
    return await service.list_datasets(session, principal, page.name, page.limit, page.cursor)


@router.get("/suites", response_model=SuiteList, responses=LISTED)
async def list_suites(
    principal: ReportReader,
    session: Session,
    limit: PageLimit = 50,
    cursor: Cursor | None = None,
) -> SuiteList:
    """Suites, newest first, each with the version new evaluations run."""
    return await service.list_suites(session, principal, limit, cursor)


@router.put(
    "/scorers/{name}/versions/{version}",
    response_model=ScorerVersionOut,
    responses=WRITE,
    openapi_extra=body_example(SCORER_EXAMPLE),
)
async def put_scorer(
    name: Name,
    version: Name,
    body: ScorerVersionIn,
    principal: ScorerWriter,
    session: Session,
    response: Response,
) -> ScorerVersionOut:
    """Register a scorer version (201); the same content again answers 200, other content 409."""
    return _created(response, *await service.put_scorer(session, principal, name, version, body))


@router.get("/scorers/{name}/versions/{version}", response_model=ScorerVersionOut, responses=READ)
async def get_scorer(
    name: Name, version: Name, principal: ReportReader, session: Session
) -> ScorerVersionOut:
    """Read a scorer version back."""
    return await service.read_scorer(session, principal, name, version)


@router.delete(
    "/scorers/{name}/versions/{version}", response_model=ScorerVersionOut, responses=READ
)
async def retire_scorer(
    name: Name, version: Name, principal: ScorerWriter, session: Session
) -> ScorerVersionOut:
    """Retire a scorer version: kept for reports, unavailable for new suites and bundles."""
    return await service.retire_scorer(session, principal, name, version)


@router.put(
    "/datasets/{name}/versions/{version}",
    response_model=DatasetVersionOut,
    response_model_exclude_none=True,
    responses=WRITE,
    openapi_extra=body_example(DATASET_EXAMPLE, ndjson_item="ExampleIn"),
)
async def put_dataset(
    name: Name,
    version: Name,
    body: DatasetVersionIn,
    principal: DatasetWriter,
    session: Session,
    response: Response,
) -> DatasetVersionOut:
    """Register a dataset version from JSON, or from NDJSON (one example a line)."""
    return _created(response, *await service.put_dataset(session, principal, name, version, body))


async def dataset_lines(request: Request, settings: AppSettings) -> DatasetVersionIn:
    """A dataset version sent as NDJSON, each line validated as one example."""
    examples: list[dict[str, Any]] = [
        validate(ExampleIn, value, (f"line {number}",)).model_dump()
        async for number, value in ndjson_values(request, settings.max_ndjson_line_bytes)
    ]
    return validate(DatasetVersionIn, {"examples": examples})


@ndjson_router.put("/datasets/{name}/versions/{version}", response_model_exclude_none=True)
async def put_dataset_lines(
    name: Name,
    version: Name,
    body: Annotated[DatasetVersionIn, Depends(dataset_lines)],
    principal: DatasetWriter,
    session: Session,
    response: Response,
) -> DatasetVersionOut:
    """The NDJSON form of `put_dataset`."""
    return _created(response, *await service.put_dataset(session, principal, name, version, body))


@router.get(
    "/datasets/{name}/versions/{version}",
    response_model=DatasetVersionOut,
    response_model_exclude_unset=True,
    responses=READ,
)
async def get_dataset(
    name: Name, version: Name, principal: ReportReader, session: Session
) -> DatasetVersionOut:
    """Read a dataset version with its examples (bodies with dataset.read_body)."""
    return await service.get_dataset(session, principal, name, version)


@router.put(
    "/suites/{name}/versions/{version}",
    response_model=SuiteVersionOut,
    responses=WRITE,
    openapi_extra=body_example(SUITE_EXAMPLE),
)
async def put_suite_version(
    name: Name,
    version: Name,
    body: SuiteVersionIn,
    principal: SuiteWriter,
    session: Session,
    response: Response,
) -> SuiteVersionOut:
    """Freeze and digest a suite version (a suite's first version becomes active)."""
    return _created(
        response, *await service.put_suite_version(session, principal, name, version, body)
    )


@router.get("/suites/{name}/versions/{version}", response_model=SuiteVersionOut, responses=READ)
async def get_suite_version(
    name: Name, version: Name, principal: ReportReader, session: Session
) -> SuiteVersionOut:
    """Read a frozen suite version."""
    return await service.read_suite_version(session, principal, name, version)


@router.get("/suites/{name}", response_model=SuiteOut, responses=READ)
async def get_suite(name: Name, principal: ReportReader, session: Session) -> SuiteOut:
    """A suite with its versions and the active one."""
    return await service.get_suite(session, principal, name)


@router.post(
    "/suites/{name}/versions/{version}/activate", response_model=ActivationOut, responses=READ
)
async def activate_suite_version(
    name: Name, version: Name, principal: SuiteWriter, session: Session, state: State
) -> ActivationOut:
    """Make a version the suite's active one; the reports it supersedes are signed so."""
    return await service.activate_suite_version(session, principal, name, version, state.signer)
