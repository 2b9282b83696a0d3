"""The two hottest reads, answered below FastAPI's routing and dependency machinery.

`GET /evaluations/api/reports/{id}` and `GET /evaluations/api/reports/forSubject` are what CI
gates and peers poll. When a request is in order (a bearer token the report.read rules admit,
a well-formed id or digest, a report that exists) this layer answers it with the very bytes the
routed endpoint would; anything else (no or bad token, a missing permission, an unknown id, odd
parameters) goes down the ordinary path, which answers with its usual problem documents.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth import Principal, PrincipalCache, principal_for
from app.repositories import reads
from app.services import reports as service

REPORT_PATH = re.compile(r"/evaluations/api/reports/([0-9a-fA-F-]{32,36})")
SUBJECT_PATH = "/evaluations/api/reports/forSubject"
_HEADERS = [(b"content-type", b"application/json")]


def _bearer(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
            return None
    return None


@dataclass(frozen=True)
class _Template:
    """What the metrics middleware reads of a route: its path template."""

    path: str


class ReportReadFastLane:
    """ASGI middleware: the happy path of the two hot reads, everything else passed on."""

    def __init__(self, app: ASGIApp, application: Any) -> None:
        self.app = app
        self.application = application

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            path = scope["path"]
            if path == SUBJECT_PATH:
                if await self._for_subject(scope, send):
                    return
            elif path.startswith("/evaluations/api/reports/"):
                match = REPORT_PATH.fullmatch(path)
                if match and await self._report(scope, send, match.group(1)):
                    return
        await self.app(scope, receive, send)

    async def _principal(self, scope: Scope, allow_peer: bool) -> Principal | None:
        secret = _bearer(scope)
        if secret is None:
            return None
        state = self.application.state
        cache: PrincipalCache = state.principals
        principal = await principal_for(secret, cache, state.reader_pool)
        if principal is None:
            return None
        if principal.kind == "peer":
            return principal if allow_peer else None
        return principal if principal.has("report.read") else None

    async def _answer(self, scope: Scope, send: Send, template: str, body: bytes) -> bool:
        scope["route"] = _Template(template)
        headers = [*_HEADERS, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return True

    async def _report(self, scope: Scope, send: Send, raw_id: str) -> bool:
        try:
            report_id = uuid.UUID(raw_id)
        except ValueError:
            return False
        principal = await self._principal(scope, allow_peer=False)
        if principal is None:
            return False
        async with self.application.state.reader_pool.acquire() as connection:
            view = await reads.report(connection, principal.project_id, report_id)
        if view is None:
            return False
        base_url = self.application.state.settings.public_base_url
        body = service.representation(view, view, base_url)
        return await self._answer(scope, send, "/evaluations/api/reports/{report_id}", body)

    async def _for_subject(self, scope: Scope, send: Send) -> bool:
        query = parse_qs(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        digests = query.get("digest", [])
        expired = query.get("include_expired", ["false"])
        if len(digests) != 1 or not 1 <= len(digests[0]) <= 300 or len(expired) != 1:
            return False
        if expired[0] not in ("true", "false"):
            return False
        principal = await self._principal(scope, allow_peer=True)
        if principal is None:
            return False
        base_url = self.application.state.settings.public_base_url
        async with self.application.state.reader_pool.acquire() as connection:
            body = await service.for_subject(
                connection, principal, digests[0], expired[0] == "true", base_url
            )
        return await self._answer(scope, send, SUBJECT_PATH, body)
