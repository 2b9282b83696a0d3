"""The hottest reads, answered below FastAPI's routing and dependency machinery.

`GET /evaluations/api/reports/{id}` and `GET /evaluations/api/reports/forSubject` are what CI
gates and peers poll; `GET /evaluations/api/reports/{id}/cases/{check}/{example}/{repeat}` is
what an auditor walking a report's cases asks, one request per case; `GET
/evaluations/api/reports` is what dashboards and the pages page through. When a request is in
order (a bearer token the report.read rules admit, a well-formed id or digest, a report that
exists) this layer answers it with the very bytes the routed endpoint would, through the same
authentication, admission, query models (app/schemas/report_queries.py) and services; anything
else
(no or bad token, a missing permission, an unknown id, odd parameters, a failure of any kind)
goes down the ordinary path, which answers with its usual problem documents.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import parse_qs

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.state import AppState, NotStarted, public_base_url, state_of
from app.identity.auth import Principal, bearer, principal_for, refusal
from app.platform.db import reading
from app.platform.replica import HEADER, read_after
from app.schemas.report_queries import ForSubjectQuery, ReportListQuery
from app.services import case_proofs, report_lists
from app.services import reports as service
from app.services.incidents import IncidentRecorder

REPORT_PATH = re.compile(r"/evaluations/api/reports/([0-9a-fA-F-]{32,36})")
_ID = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}"
PROOF_PATH = re.compile(
    rf"/evaluations/api/reports/([0-9a-fA-F-]{{32,36}})/cases/({_ID})/({_ID})/(0|[1-9][0-9]{{0,5}})"
)
PROOF_TEMPLATE = "/evaluations/api/reports/{report_id}/cases/{check_id}/{example_id}/{repeat}"
SUBJECT_PATH = "/evaluations/api/reports/forSubject"
LIST_PATH = "/evaluations/api/reports"
Q = TypeVar("Q", bound=BaseModel)
_HEADERS = [(b"content-type", b"application/json")]
_READ_AFTER = HEADER.lower().encode()
logger = logging.getLogger(__name__)


def _authorization(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            return str(value.decode("latin-1"))
    return None


def _read_after(scope: Scope) -> int | None:
    """The WAL position the request's `EvalBook-Read-After` names (app/platform/replica.py)."""
    for name, value in scope["headers"]:
        if name == _READ_AFTER:
            return read_after(value.decode("latin-1"))
    return None


@dataclass(frozen=True)
class _Template:
    """What the metrics middleware reads of a route: its path template."""

    path: str


class ReportReadFastLane:
    """ASGI middleware: the happy path of the four hot reads, everything else passed on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = None
        if scope["type"] == "http" and scope["method"] == "GET":
            try:
                answer = await self._answer_for(scope)
            except NotStarted:
                pass
            except Exception as exc:
                # Nothing was sent yet: the routed endpoint answers, with its own problem
                # document for whatever failed here (a 503 while the database is away).
                logger.debug("fast lane passed a request on after %r", exc)
        if answer is None:
            await self.app(scope, receive, send)
            return
        template, body = answer
        scope["route"] = _Template(template)
        headers = [*_HEADERS, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _answer_for(self, scope: Scope) -> tuple[str, bytes] | None:
        """(route template, body) of a request this lane answers, or None."""
        path = scope["path"]
        if path == SUBJECT_PATH:
            return await self._for_subject(scope)
        if path == LIST_PATH:
            return await self._list(scope)
        if path.startswith("/evaluations/api/reports/"):
            match = REPORT_PATH.fullmatch(path)
            if match is not None:
                return await self._report(scope, match.group(1))
            match = PROOF_PATH.fullmatch(path)
            if match is not None and not scope["query_string"]:
                return await self._proof(scope, *match.groups())
        return None

    async def _principal(self, state: AppState, scope: Scope, allow_peer: bool) -> Principal | None:
        secret = bearer(_authorization(scope))
        if secret is None:
            return None
        principal = await principal_for(secret, state.principals, state.reader_pool)
        if principal is None or refusal(principal, "report.read", allow_peer=allow_peer):
            return None
        return principal

    async def _report_reader(
        self, scope: Scope, raw_id: str
    ) -> tuple[AppState, Principal, uuid.UUID] | None:
        """The state, a report reader (no peer) and the report id, for a report's paths."""
        try:
            report_id = uuid.UUID(raw_id)
        except ValueError:
            return None
        state = state_of(scope["app"])
        principal = await self._principal(state, scope, allow_peer=False)
        return None if principal is None else (state, principal, report_id)

    async def _report(self, scope: Scope, raw_id: str) -> tuple[str, bytes] | None:
        found = await self._report_reader(scope, raw_id)
        if found is None:
            return None
        state, principal, report_id = found
        async with state.reads.connection(_read_after(scope)) as connection:
            view = await service.find(connection, principal, report_id)
        if view is None:
            return None
        body = service.representation(view, public_base_url(state, Request(scope)))
        return "/evaluations/api/reports/{report_id}", body

    async def _proof(
        self, scope: Scope, raw_id: str, check_id: str, example_id: str, repeat: str
    ) -> tuple[str, bytes] | None:
        found = await self._report_reader(scope, raw_id)
        if found is None:
            return None
        state, principal, report_id = found
        async with reading(state.reader_pool) as connection:
            body = await case_proofs.case_proof(
                connection,
                principal,
                state.case_trees,
                report_id,
                check_id,
                example_id,
                int(repeat),
                baseline=False,
                incidents=IncidentRecorder(state.background_sessionmaker),
            )
        return PROOF_TEMPLATE, body

    async def _for_subject(self, scope: Scope) -> tuple[str, bytes] | None:
        query = _query(scope, ForSubjectQuery)
        if query is None or query.format != "json":
            return None  # format=vsa: the routed endpoint
        state = state_of(scope["app"])
        principal = await self._principal(state, scope, allow_peer=True)
        if principal is None:
            return None
        async with state.reads.connection(_read_after(scope)) as connection:
            body = await service.for_subject(
                connection, principal, query, public_base_url(state, Request(scope))
            )
        return SUBJECT_PATH, body

    async def _list(self, scope: Scope) -> tuple[str, bytes] | None:
        query = _query(scope, ReportListQuery)
        if query is None:
            return None
        state = state_of(scope["app"])
        principal = await self._principal(state, scope, allow_peer=False)
        if principal is None:
            return None
        async with state.reads.connection(_read_after(scope)) as connection:
            body = await report_lists.list_reports(
                connection,
                principal,
                query.filters(),
                public_base_url=public_base_url(state, Request(scope)),
                limit=query.limit,
                cursor=query.cursor,
                view=query.view,
                cache=state.list_pages,
                items=state.list_items,
            )
        return LIST_PATH, body


def _query(scope: Scope, model: type[Q]) -> Q | None:
    """The request's query as the routed endpoint reads it (the same model), or None where
    that endpoint would refuse it or a parameter is repeated (both left to it)."""
    query = parse_qs(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    if any(len(values) != 1 for values in query.values()):
        return None
    try:
        return model.model_validate({name: values[0] for name, values in query.items()})
    except ValidationError:
        return None
