"""The permission aliases routers declare: the bearer token resolved to a principal (through
the application's principal cache), then 401 or 403 unless it may call the endpoint."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.state import state_of
from app.domain.errors import Forbidden, Unauthenticated
from app.identity.auth import Principal, bearer, principal_for, refusal

# Declares the scheme in OpenAPI; the header is read by `bearer`, as the fast lane reads it.
bearer_scheme = HTTPBearer(auto_error=False, description="an API token of one project")


async def authenticate(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)]
) -> Principal:
    """Resolve the bearer token to a principal, or answer 401."""
    secret = bearer(request.headers.get("authorization"))
    if secret is None:
        raise Unauthenticated()
    state = state_of(request.app)
    principal = await principal_for(secret, state.principals, state.reader_pool)
    if principal is None:
        raise Unauthenticated("the bearer token is not valid")
    return principal


def require(
    permission: str, *also: str, allow_peer: bool = False
) -> Callable[..., Awaitable[Principal]]:
    """A dependency that answers 403 unless the token holds `permission` (and each of `also`)."""

    async def dependency(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        for needed in (permission, *also):
            refused = refusal(principal, needed, allow_peer=allow_peer)
            if refused is not None:
                raise refused
        return principal

    dependency.__name__ = f"require_{permission.replace('.', '_')}"
    return dependency


def require_one_of(*permissions: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency that answers 403 unless the token holds at least one of `permissions`."""

    async def dependency(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        refusals = [refusal(principal, needed) for needed in permissions]
        if all(refused is not None for refused in refusals):
            raise Forbidden(f"the token lacks every one of the permissions {list(permissions)}")
        return principal

    dependency.__name__ = "require_" + "_or_".join(p.replace(".", "_") for p in permissions)
    return dependency


async def require_peer(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    """Only a peer token may call the peer endpoint."""
    if principal.kind != "peer":
        raise Forbidden("this endpoint is for peer tokens")
    return principal


ScorerWriter = Annotated[Principal, Depends(require("scorer.write"))]
DatasetWriter = Annotated[Principal, Depends(require("dataset.write"))]
SuiteWriter = Annotated[Principal, Depends(require("suite.write"))]
EvaluationWriter = Annotated[Principal, Depends(require("evaluation.write"))]
ReportReader = Annotated[Principal, Depends(require("report.read"))]
ReportReaderOrPeer = Annotated[Principal, Depends(require("report.read", allow_peer=True))]
LabelWriter = Annotated[Principal, Depends(require("label.write"))]
# Who may see what is to be labelled: a reader of reports, or a labeller.
LabelRequestReader = Annotated[Principal, Depends(require_one_of("report.read", "label.write"))]
ReportExporter = Annotated[Principal, Depends(require("report.export"))]
# A board is made from reports the token may read.
BoardWriter = Annotated[Principal, Depends(require("board.write", "report.read"))]
PeerManager = Annotated[Principal, Depends(require("peer.manage"))]
Admin = Annotated[Principal, Depends(require("admin"))]
Peer = Annotated[Principal, Depends(require_peer)]
