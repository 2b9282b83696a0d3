"""Bearer tokens and principals: who a token is, what it may do (app/api/access.py declares it
at the edge)."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

from app.domain.errors import Forbidden
from app.domain.vocabulary import ASSURANCE_RANK
from app.platform.db import ReadPool, reading
from app.repositories import reads

TOKEN_KINDS = ("user", "runner", "peer", "labeller")
TOKEN_PREFIX = "evb_"
USER_ASSURANCE_CAP = "reported"
LOCAL_ASSURANCE_CAP = "development_unisolated"
# A labeller token attests human labels at most this strongly, and may hold only these.
LABELLER_ASSURANCE_CAP = "human_attested"
LABELLER_PERMISSIONS = frozenset({"label.write", "report.read", "dataset.read_body"})


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

    @classmethod
    def from_row(cls, row: Any) -> Principal:
        """From a row of a token with its project and organization (reads.PRINCIPAL_SQL)."""
        return cls(
            token_id=row["id"],
            token_name=row["name"],
            kind=row["kind"],
            permissions=frozenset(row["permissions"]),
            assurance_cap=row["assurance_cap"],
            project_id=row["project_id"],
            project_slug=row["project_slug"],
            organization_id=row["organization_id"],
            organization_slug=row["organization_slug"],
        )

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


def bearer(authorization: str | None) -> str | None:
    """The secret of an `Authorization: Bearer <secret>` header value, or None."""
    scheme, _, credentials = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


class PrincipalCache:
    """Recently resolved tokens, for `ttl` seconds (0 disables).

    A revocation reaches every process at once: a trigger announces it (NOTIFY) and each
    process's RevocationListener calls `forget_all`; `ttl` bounds what a dropped listening
    connection could miss.
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[bytes, tuple[float, Principal]] = {}
        self.lookups: dict[bytes, asyncio.Future[Principal | None]] = {}

    def get(self, secret_hash: bytes) -> Principal | None:
        """A cached principal that is still fresh."""
        entry = self._entries.get(secret_hash)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, secret_hash: bytes, principal: Principal) -> None:
        """Remember a principal (bounded: the oldest half goes when it grows large)."""
        if self.ttl <= 0:
            return
        if len(self._entries) >= 10_000:
            for key in list(self._entries)[:5_000]:
                del self._entries[key]
        self._entries[secret_hash] = (time.monotonic() + self.ttl, principal)

    def forget_all(self) -> None:
        """Drop every entry (after a token was revoked here)."""
        self._entries.clear()


async def _look_up(secret_hash: bytes, cache: PrincipalCache, pool: ReadPool) -> Principal | None:
    async with reading(pool) as connection:
        row = await reads.principal_row(connection, secret_hash)
    if row is None:
        return None
    principal = Principal.from_row(row)
    cache.put(secret_hash, principal)
    return principal


async def principal_for(secret: str, cache: PrincipalCache, pool: ReadPool) -> Principal | None:
    """The principal of a bearer secret (cached for a moment), or None when not valid.

    When a cached entry expires under load, every request carrying that token would look it
    up at once; one lookup runs and the others wait for it."""
    secret_hash = hash_secret(secret)
    principal = cache.get(secret_hash)
    if principal is not None:
        return principal
    pending = cache.lookups.get(secret_hash)
    if pending is None:
        pending = asyncio.ensure_future(_look_up(secret_hash, cache, pool))
        cache.lookups[secret_hash] = pending
        pending.add_done_callback(lambda _: cache.lookups.pop(secret_hash, None))
    return await asyncio.shield(pending)


def refusal(principal: Principal, permission: str, *, allow_peer: bool = False) -> Forbidden | None:
    """Why `principal` may not call an endpoint that needs `permission`, or None when it may.

    Peer tokens may only reach the endpoints that name them (`allow_peer`)."""
    if principal.kind == "peer":
        return None if allow_peer else Forbidden("a peer token may only call the peer endpoints")
    if not principal.has(permission):
        return Forbidden(f"the token lacks the permission {permission!r}")
    return None


def label_assurance(principal: Principal) -> str:
    """The assurance a token's labels carry: the strongest it may attest (a user token's
    labels are only reported, which no corrected verdict counts)."""
    cap = principal.assurance_cap
    if principal.kind == "labeller":
        return weakest(cap, LABELLER_ASSURANCE_CAP)
    if principal.kind != "runner":
        return weakest(cap, USER_ASSURANCE_CAP)
    return cap


def assurance_cap(principal: Principal, execution_mode: str) -> str:
    """The strongest assurance cases of this token and evaluation may claim."""
    cap = principal.assurance_cap
    if principal.kind != "runner":
        cap = weakest(cap, USER_ASSURANCE_CAP)
    if execution_mode == "local":
        cap = weakest(cap, LOCAL_ASSURANCE_CAP)
    return cap
