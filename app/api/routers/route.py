"""The route class of every API endpoint: bodies read within limits as strict I-JSON, every
failure a problem document answered inside the app, 405 naming every allowed method."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

from app.api.deps import SESSION_KEY
from app.api.failures import as_problem
from app.api.routers.body import NDJSON_TYPES, media_type, media_type_of, parse_json, read_limited
from app.api.state import state_of
from app.domain.errors import ProblemError, UnsupportedMediaType, validation_error
from app.platform.replica import HEADER as READ_AFTER_HEADER
from app.platform.replica import ReplicaGone, format_lsn

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
# Raised on purpose and rendered by their own handlers; anything else is mapped by as_problem.
_TYPED = (ProblemError, HTTPException, RequestValidationError)


class StrictJSONRequest(Request):
    """A request whose body is read within the configured limit (413 past it) and parsed as
    strict I-JSON (422 naming the fault: duplicate keys, non-finite or unsafe numbers, lone
    surrogates, U+0000)."""

    async def body(self) -> bytes:
        """The whole body, refused as soon as it passes the limit."""
        if not hasattr(self, "_body"):
            limit = state_of(self.app).settings.max_json_body_bytes
            self._body = await read_limited(self, limit)
        return self._body

    async def json(self) -> Any:
        """The body as strict I-JSON."""
        if not hasattr(self, "_json"):
            data = await self.body()
            if not data.strip():
                raise validation_error(("body",), "a JSON body is required")
            self._json = parse_json(data, ("body",))
        return self._json


async def _tell_read_after(request: Request, response: Response) -> None:
    """With a read replica, a write's response names the WAL position its commit reached, for
    reads that must see it (`EvalBook-Read-After`, app/platform/replica.py)."""
    reads = state_of(request.app).reads
    if reads.has_replica:
        response.headers[READ_AFTER_HEADER] = format_lsn(await reads.note_write())


def _check_json_media_type(request: Request) -> None:
    kind = media_type(request)
    if kind and kind != "application/json" and not kind.endswith("+json"):
        raise UnsupportedMediaType(f"send application/json, not {kind}")


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(scope: Scope) -> str:
    """Every method some route of the application answers at this path, for a 405's `Allow`
    (Starlette's own 405 names only the methods of the first route whose path matched)."""
    routes = scope["app"].router.routes
    allowed = [
        method
        for method in METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    ]
    return ", ".join(sorted(allowed))


class EdgeRoute(APIRoute):
    """FastAPI's route, with the body read strictly before validation, the request's
    transaction committed once the endpoint has returned (before the response is sent), and
    every exception of either answered as a problem document by the app's handlers, so the
    connection stays open."""

    # Exceptions raised on purpose and answered by a handler of their own.
    passed_through: tuple[type[Exception], ...] = _TYPED

    def get_route_handler(self) -> Handler:
        """The endpoint's handler wrapped with strict body reading and failure mapping."""
        handle = super().get_route_handler()
        reads_json = self.body_field is not None

        async def handler(request: Request) -> Response:
            try:
                if reads_json:
                    request = StrictJSONRequest(request.scope, request.receive)
                    _check_json_media_type(request)
                    await request.json()
                try:
                    response = await handle(request)
                except ReplicaGone:
                    if request.method != "GET":
                        raise
                    # The replica went away under this read: once more, from the primary.
                    response = await handle(request)
                session = request.scope.get(SESSION_KEY)
                if session is not None:
                    await session.commit()
                    if request.method != "GET":
                        await _tell_read_after(request, response)
                return response
            except self.passed_through:
                raise
            except Exception as exc:
                raise as_problem(exc) from exc

        return handler

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 405 with every method the path allows, not only this route's."""
        if self.methods and scope["method"] not in self.methods:
            raise HTTPException(405, headers={"Allow": allowed_methods(scope)})
        await super().handle(scope, receive, send)


def _scope_media_type(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return media_type_of(value.decode("latin-1"))
    return ""


class NDJSONRoute(EdgeRoute):
    """The NDJSON twin of a JSON endpoint at the same path and method: matched only when the
    body is NDJSON, which its endpoint reads as a stream (never whole). Registered before the
    JSON endpoint, which documents both media types."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """No match unless the request's body is NDJSON."""
        if scope["type"] != "http" or _scope_media_type(scope) not in NDJSON_TYPES:
            return Match.NONE, {}
        return super().matches(scope)


def body_example(example: Any, *, ndjson_item: str | None = None) -> dict[str, Any]:
    """`openapi_extra` giving a declared JSON body an example and, with `ndjson_item`, its
    NDJSON form (one `ndjson_item` a line)."""
    content: dict[str, Any] = {"application/json": {"example": example}}
    if ndjson_item is not None:
        # Bytes, not a $ref to the item: generators take a byte stream whole, and the lines'
        # schema is the JSON body's item, named in the description.
        content["application/x-ndjson"] = {
            "schema": {"type": "string", "format": "binary"},
            "description": f"one `{ndjson_item}` (JSON) a line, read as a stream",
        }
    return {"requestBody": {"content": content}}
