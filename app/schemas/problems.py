"""The problem document (RFC 9457) every error answers with, and its OpenAPI responses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from app.domain.errors import PROBLEM_MEDIA_TYPE


class ProblemLocation(BaseModel):
    """One refused location of a validation error."""

    loc: list[str | int]
    msg: str


class Problem(BaseModel):
    """RFC 9457 problem details; `errors` for validation, `index` for the refused case or line."""

    model_config = ConfigDict(extra="forbid")

    type: str
    title: str
    status: int
    detail: str
    instance: str
    errors: list[ProblemLocation] | None = None
    index: int | None = None


WHY = {
    400: "a malformed request",
    401: "no valid bearer token (`WWW-Authenticate: Bearer`)",
    403: "the token lacks the permission, or claims more assurance than it may",
    404: "unknown id, or one of another project",
    405: "the method is not allowed here (`Allow` lists those that are)",
    409: "the request contradicts stored, immutable state",
    413: "the body (or one NDJSON line) passes the configured limit",
    415: "the body is not in a media type this endpoint reads",
    422: "validation failed: `errors` names each refused location",
    500: "a fault of the service; nothing of the request was kept",
    503: "the database or the object store is unavailable; retry after `Retry-After` seconds",
}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries: each status answered with a problem document."""
    return {
        status: {
            "model": Problem,
            "description": WHY[status],
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


# What any authenticated endpoint may answer; routers add the rest (404, 409, 413, 415).
AUTHENTICATED = problems(401, 403, 422, 500, 503)
BODY = problems(413, 415)
# A list: a cursor this service did not issue for it is a 400.
LISTED = problems(400)
