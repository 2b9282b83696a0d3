"""Typed errors: one base class, rendered as RFC 9457 problem details by one handler."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson

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


def encodable(text: str) -> str:
    """`text` as any UTF-8 encoder takes it: a lone surrogate becomes its `\\uXXXX` spelling."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _encodable_tree(value: Any) -> Any:
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {encodable(str(key)): _encodable_tree(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable_tree(item) for item in value]
    return value


# Inside JSON strings (the only place these bytes can stand), their \u spellings: a problem
# document that echoes input never holds markup a browser sniffing it could run.
_MARKUP = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"))


def render_problem(problem: dict[str, Any]) -> bytes:
    """A problem document's bytes: every string encodable (lone surrogates spelled out) and
    no raw `<`, `>` or `&`, whatever input the messages echo."""
    data = orjson.dumps(_encodable_tree(problem))
    for raw, escaped in _MARKUP:
        data = data.replace(raw, escaped)
    return data


def instance_of(path: str) -> str:
    """A request path as a problem's `instance`: a URI reference, percent-encoded."""
    return quote(encodable(path), safe="/:@!$'()*+,;=-._~")


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


class RequestTimeout(ProblemError):
    """The request's body stopped arriving; the connection is closed after the answer."""

    status, type_slug, title = 408, "request-timeout", "Request timeout"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"Connection": "close"})


class ClientClosedRequest(ProblemError):
    """The client went away before its request was read (nginx's 499: nobody is answered)."""

    status, type_slug, title = 499, "client-closed-request", "Client closed request"


class Conflict(ProblemError):
    """The request contradicts stored, immutable state."""

    status, type_slug, title = 409, "conflict", "Conflict"


class IntegrityFailure(Conflict):
    """What the service was asked to serve no longer matches what a report bound (an incident
    is opened)."""

    status, type_slug, title = 409, "integrity", "Integrity failure"


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
