"""Typed errors: one base class, rendered as RFC 9457 problem details by one handler."""

from __future__ import annotations

from typing import Any

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_BASE = "https://evalbook.dev/problems/"


class ProblemError(Exception):
    """Base of every error the API answers with; subclasses fix the status and type."""

    status: int = 500
    type_slug: str = "internal"
    title: str = "Internal error"

    def __init__(
        self,
        detail: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        index: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors
        self.index = index
        self.headers = headers or {}

    def to_problem(self, instance: str) -> dict[str, Any]:
        """Render as an RFC 9457 problem details object."""
        problem: dict[str, Any] = {
            "type": PROBLEM_BASE + self.type_slug,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "instance": instance,
        }
        if self.errors is not None:
            problem["errors"] = self.errors
        if self.index is not None:
            problem["index"] = self.index
        return problem


class BadRequest(ProblemError):
    """The request is malformed in a way that is not a field validation error."""

    status, type_slug, title = 400, "bad-request", "Bad request"


class Unauthenticated(ProblemError):
    """No valid bearer token."""

    status, type_slug, title = 401, "unauthenticated", "Authentication required"

    def __init__(self, detail: str = "a valid bearer token is required") -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class Forbidden(ProblemError):
    """The token lacks a permission or claims more than it may."""

    status, type_slug, title = 403, "forbidden", "Forbidden"


class NotFound(ProblemError):
    """Unknown id, or one that belongs to another project."""

    status, type_slug, title = 404, "not-found", "Not found"


class Conflict(ProblemError):
    """The request contradicts stored, immutable state."""

    status, type_slug, title = 409, "conflict", "Conflict"


class PayloadTooLarge(ProblemError):
    """A body or NDJSON line over the configured limit."""

    status, type_slug, title = 413, "payload-too-large", "Payload too large"


class UnsupportedMediaType(ProblemError):
    """A body in a media type the endpoint does not read."""

    status, type_slug, title = 415, "unsupported-media-type", "Unsupported media type"


class ValidationFailed(ProblemError):
    """Well-formed JSON whose content is refused; `errors` lists each location."""

    status, type_slug, title = 422, "validation", "Validation failed"


class InternalError(ProblemError):
    """A fault of the service itself (a bug): logged in full, answered without details."""

    status, type_slug, title = 500, "internal", "Internal error"

    def __init__(self, detail: str = "an unexpected error occurred") -> None:
        super().__init__(detail)


class ServiceUnavailable(ProblemError):
    """A dependency (database, object store) is unreachable; the client may retry."""

    status, type_slug, title = 503, "unavailable", "Service unavailable"
    retry_after_seconds = 1

    def __init__(self, detail: str, *, retry_after: int | None = None) -> None:
        seconds = self.retry_after_seconds if retry_after is None else retry_after
        super().__init__(detail, headers={"Retry-After": str(seconds)})


def validation_error(
    loc: tuple[str | int, ...] | list[str | int], msg: str, *, index: int | None = None
) -> ValidationFailed:
    """Build a 422 naming one location."""
    where = ".".join(str(part) for part in loc)
    return ValidationFailed(f"{where}: {msg}", errors=[{"loc": list(loc), "msg": msg}], index=index)
