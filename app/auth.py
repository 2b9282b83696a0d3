"""Bearer tokens, principals and permission dependencies."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import get_session
from app.errors import Forbidden, Unauthenticated
from app.models.evaluations import ASSURANCE_LEVELS
from app.repositories import tokens as token_repo

PERMISSIONS = (
    "suite.write",
    "dataset.write",
    "scorer.write",
    "evaluation.write",
    "report.read",
    "report.export",
    "dataset.read_body",
    "peer.manage",
    "admin",
)
TOKEN_KINDS = ("user", "runner", "peer")
TOKEN_PREFIX = "evb_"
ASSURANCE_RANK = {level: rank for rank, level in enumerate(ASSURANCE_LEVELS)}
USER_ASSURANCE_CAP = "reported"
LOCAL_ASSURANCE_CAP = "development_unisolated"


@dataclass(frozen=True)
class Principal:
    """Who is calling: one token of one project."""

    token_id: uuid.UUID
    token_name: str
    kind: str
    permissions: frozenset[str]
    assurance_cap: str
    project_id: uuid.UUID
    project_slug: str
    organization_id: uuid.UUID
    organization_slug: str

    def has(self, permission: str) -> bool:
        """True when the token holds the permission (admin holds every one)."""
        return "admin" in self.permissions or permission in self.permissions


def new_token_secret() -> str:
    """A fresh token: 32 random bytes, URL-safe, with a recognizable prefix."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> bytes:
    """Tokens carry 256 bits of entropy, so a plain SHA-256 is a sound lookup hash."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


def weakest(*levels: str) -> str:
    """The weakest of several assurance levels."""
    return min(levels, key=ASSURANCE_RANK.__getitem__)


def stronger_than(level: str, cap: str) -> bool:
    """True when `level` claims more than `cap` allows."""
    return ASSURANCE_RANK[level] > ASSURANCE_RANK[cap]


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        raise Unauthenticated()
    return credentials.strip()


async def authenticate(
    request: Request, session: AsyncSession = Depends(get_session, scope="function")
) -> Principal:
    """Resolve the bearer token to a principal, or answer 401."""
    secret = _bearer(request)
    row = await token_repo.find_active_by_hash(session, hash_secret(secret))
    if row is None:
        raise Unauthenticated("the bearer token is not valid")
    token, project, organization = row
    return Principal(
        token_id=token.id,
        token_name=token.name,
        kind=token.kind,
        permissions=frozenset(token.permissions),
        assurance_cap=token.assurance_cap,
        project_id=project.id,
        project_slug=project.slug,
        organization_id=organization.id,
        organization_slug=organization.slug,
    )


def require(permission: str, *, allow_peer: bool = False) -> Callable[..., Awaitable[Principal]]:
    """A dependency that answers 403 unless the token holds `permission`.

    Peer tokens may only reach the endpoints that name them (`allow_peer`).
    """

    async def dependency(principal: Principal = Depends(authenticate)) -> Principal:
        if principal.kind == "peer":
            if not allow_peer:
                raise Forbidden("a peer token may only call the peer endpoints")
            return principal
        if not principal.has(permission):
            raise Forbidden(f"the token lacks the permission {permission!r}")
        return principal

    dependency.__name__ = f"require_{permission.replace('.', '_')}"
    return dependency


async def require_peer(principal: Principal = Depends(authenticate)) -> Principal:
    """Only a peer token may call the peer endpoint."""
    if principal.kind != "peer":
        raise Forbidden("this endpoint is for peer tokens")
    return principal
