"""Organizations, projects and tokens (command line and admin API)."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import Forbidden, NotFound, validation_error
from app.domain.identifiers import IDENTIFIER_RE
from app.domain.vocabulary import ASSURANCE_RANK
from app.identity.auth import (
    LABELLER_ASSURANCE_CAP,
    LABELLER_PERMISSIONS,
    TOKEN_KINDS,
    USER_ASSURANCE_CAP,
    Principal,
    assurance_cap,
    hash_secret,
    new_token_secret,
    stronger_than,
    weakest,
)
from app.identity.permissions import PERMISSIONS
from app.models import ApiToken, Project
from app.repositories import tokens as repo
from app.schemas.tokens import TokenIn, TokenOut


def split_project_path(path: str) -> tuple[str, str]:
    """`ORG/PROJECT` into its two identifiers."""
    organization, _, project = path.partition("/")
    if not (IDENTIFIER_RE.fullmatch(organization) and IDENTIFIER_RE.fullmatch(project)):
        raise ValueError(f"expected ORG/PROJECT with two identifiers, got {path!r}")
    return organization, project


async def create_project(session: AsyncSession, path: str) -> tuple[Project, bool]:
    """Create the organization (if new) and the project; (project, created)."""
    organization_slug, project_slug = split_project_path(path)
    _, project, created = await repo.get_or_create_project(session, organization_slug, project_slug)
    return project, created


def check_token_request(permissions: list[str], kind: str, assurance: str | None) -> str:
    """Validate a token's permissions and kind; return its assurance cap."""
    for permission in permissions:
        if permission not in PERMISSIONS:
            raise validation_error(
                ("body", "permissions"),
                f"unknown permission {permission!r} (one of: {', '.join(PERMISSIONS)})",
            )
    if kind not in TOKEN_KINDS:
        raise validation_error(("body", "kind"), f"kind is one of {list(TOKEN_KINDS)}")
    if assurance is not None and assurance not in ASSURANCE_RANK:
        raise validation_error(("body", "assurance"), f"one of {list(ASSURANCE_RANK)}")
    if kind == "labeller":
        extra = sorted(set(permissions) - LABELLER_PERMISSIONS)
        if extra:
            raise validation_error(
                ("body", "permissions"),
                f"a labeller token holds only {sorted(LABELLER_PERMISSIONS)}, not {extra}",
            )
        return weakest(assurance or LABELLER_ASSURANCE_CAP, LABELLER_ASSURANCE_CAP)
    cap = assurance or USER_ASSURANCE_CAP
    if kind == "user":
        cap = weakest(cap, USER_ASSURANCE_CAP)
    if kind == "peer":
        cap = "development_unisolated"
    return cap


async def create_token(
    session: AsyncSession,
    project_id: uuid.UUID,
    name: str,
    permissions: list[str],
    kind: str = "user",
    assurance: str | None = None,
) -> tuple[ApiToken, str]:
    """Create a token; return the row and the secret (shown once, stored only hashed)."""
    cap = check_token_request(permissions, kind, assurance)
    secret = new_token_secret()
    token = ApiToken(
        id=uuid.uuid4(),
        project_id=project_id,
        name=name,
        secret_hash=hash_secret(secret),
        kind=kind,
        permissions=sorted(set(permissions)) if kind != "peer" else [],
        assurance_cap=cap,
    )
    await repo.add_token(session, token)
    return token, secret


async def create_token_for_path(
    session: AsyncSession,
    project_path: str,
    name: str,
    permissions: list[str],
    kind: str = "user",
    assurance: str | None = None,
) -> str:
    """Create a token in `ORG/PROJECT`; return the secret."""
    organization_slug, project_slug = split_project_path(project_path)
    project = await repo.find_project(session, organization_slug, project_slug)
    if project is None:
        raise NotFound(f"no project {project_path}")
    _, secret = await create_token(session, project.id, name, permissions, kind, assurance)
    return secret


# The kinds of token each kind may create: only a runner vouches for where cases ran.
KINDS_CREATED_BY = {"runner": frozenset(TOKEN_KINDS), "user": frozenset({"user", "peer"})}


def beyond_creator(creator: Principal, permissions: list[str], kind: str, cap: str) -> str | None:
    """What a new token (its permissions, kind and assurance cap) would hold beyond the token
    creating it, or None when it holds nothing more."""
    for permission in permissions:
        held = "admin" in creator.permissions if permission == "admin" else creator.has(permission)
        if not held:
            return f"the permission {permission!r}, which the creating token lacks"
    kinds = KINDS_CREATED_BY.get(creator.kind, frozenset())
    if kind not in kinds:
        return f"the kind {kind!r}; a {creator.kind} token creates only {sorted(kinds)} tokens"
    own_cap = assurance_cap(creator, "external")
    if stronger_than(cap, own_cap):
        return f"the assurance {cap!r}, above the creating token's {own_cap!r}"
    return None


async def create_token_for_admin(
    session: AsyncSession, principal: Principal, body: TokenIn
) -> TokenOut:
    """A new token in the admin's project, holding nothing its creator does not (403 naming
    what it would hold beyond); the secret is shown once."""
    permissions: list[str] = list(body.permissions)
    # Without an assurance, the kind's default cap (a labeller's is what its labels attest),
    # never above the creator's own.
    default = LABELLER_ASSURANCE_CAP if body.kind == "labeller" else USER_ASSURANCE_CAP
    assurance = body.assurance or weakest(default, assurance_cap(principal, "external"))
    cap = check_token_request(permissions, body.kind, assurance)
    excess = beyond_creator(principal, permissions, body.kind, body.assurance or cap)
    if excess is not None:
        raise Forbidden(f"a token may not hold more than the token creating it: {excess}")
    token, secret = await create_token(
        session, principal.project_id, body.name, permissions, body.kind, assurance
    )
    return TokenOut(
        token_id=str(token.id),
        name=token.name,
        kind=token.kind,
        permissions=list(token.permissions),
        assurance=token.assurance_cap,
        token=secret,
    )
