"""Human labels of judged checks (docs/judges.md, section 2): what to label, and posting labels
as JSON or NDJSON."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from app.api.access import LabelRequestReader, LabelWriter
from app.api.deps import AppSettings, Session, Suites
from app.api.routers.body import ndjson_value_batches, validate, validate_lines
from app.api.routers.params import PageLimit
from app.api.routers.route import EdgeRoute, NDJSONRoute, body_example
from app.schemas.common import Cursor
from app.schemas.labels import LabelBatchIn, LabelBatchOut, LabelIn, RequestedLabels
from app.schemas.problems import AUTHENTICATED, BODY, problems
from app.services import labels as service
from app.services.labels import NumberedLabel

PREFIX = "/api/v1/evaluations"
router = APIRouter(prefix=PREFIX, tags=["labels"], route_class=EdgeRoute, responses=AUTHENTICATED)
# Registered before `router`: the NDJSON form of a label batch, matched on its media type.
ndjson_router = APIRouter(prefix=PREFIX, route_class=NDJSONRoute, include_in_schema=False)
LABELS_EXAMPLE = {
    "labels": [
        {"check_id": "accuracy", "example_id": "e07", "label": "fail", "labeller": "ana"},
    ]
}


@router.get(
    "/{evaluation_id}/labels/requested",
    response_model=RequestedLabels,
    responses=problems(400, 404),
)
async def requested_labels(
    evaluation_id: uuid.UUID,
    principal: LabelRequestReader,
    session: Session,
    suites: Suites,
    cursor: Annotated[Cursor | None, Query()] = None,
    limit: PageLimit = service.DEFAULT_PAGE,
) -> RequestedLabels:
    """The sampled examples of each judged check, whether each holds a label, and (with
    dataset.read_body) the input and the output the judge scored."""
    return await service.requested(session, principal, evaluation_id, suites, cursor, limit)


@router.post(
    "/{evaluation_id}/labels",
    response_model=LabelBatchOut,
    responses={**problems(404, 409), **BODY},
    openapi_extra=body_example(LABELS_EXAMPLE, ndjson_item="LabelIn"),
)
async def add_labels(
    evaluation_id: uuid.UUID,
    body: LabelBatchIn,
    principal: LabelWriter,
    session: Session,
    suites: Suites,
) -> LabelBatchOut:
    """Add human labels as JSON or NDJSON: all or nothing; identical re-sends are accepted."""
    items = [NumberedLabel(label, ("body", "labels", i)) for i, label in enumerate(body.labels)]
    return await service.post(session, principal, evaluation_id, items, suites)


async def label_lines(request: Request, settings: AppSettings) -> list[NumberedLabel]:
    """An NDJSON body's labels, each line validated as one label."""
    items = []
    async for numbers, values in ndjson_value_batches(request, settings.max_ndjson_line_bytes):
        labels = validate_lines(LabelIn, numbers, values)
        items += [
            NumberedLabel(label, (f"line {number}",))
            for number, label in zip(numbers, labels, strict=True)
        ]
    if not items:
        validate(LabelBatchIn, {"labels": []})
    return items


@ndjson_router.post("/{evaluation_id}/labels", response_model=LabelBatchOut)
async def add_label_lines(
    evaluation_id: uuid.UUID,
    items: Annotated[list[NumberedLabel], Depends(label_lines)],
    principal: LabelWriter,
    session: Session,
    suites: Suites,
) -> LabelBatchOut:
    """The NDJSON form of `add_labels`."""
    return await service.post(session, principal, evaluation_id, items, suites)
