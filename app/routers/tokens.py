"""Tokens created by an admin token of the same project."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, status
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, require
from app.db import get_session
from app.routers.body import body_doc, json_body, validate
from app.routers.deps import settings_of
from app.schemas.tokens import TokenIn, TokenOut
from app.services import projects as service

router = APIRouter(prefix="/api/v1", tags=["tokens"])


@router.post(
    "/tokens",
    status_code=status.HTTP_201_CREATED,
    response_model=TokenOut,
    openapi_extra=body_doc(
        TokenIn,
        example={
            "name": "ci",
            "permissions": ["evaluation.write"],
            "kind": "runner",
            "assurance": "reported",
        },
    ),
)
async def create_token(
    request: Request,
    principal: Principal = Depends(require("admin")),
    session: AsyncSession = Depends(get_session, scope="function"),
) -> TokenOut:
    """Create a token in the admin's project; the secret is shown once."""
    body = validate(TokenIn, await json_body(request, settings_of(request).max_json_body_bytes))
    token, secret = await service.create_token(
        session, principal.project_id, body.name, body.permissions, body.kind, body.assurance
    )
    return TokenOut(
        token_id=str(token.id),
        name=token.name,
        kind=token.kind,
        permissions=list(token.permissions),
        assurance=token.assurance_cap,
        token=secret,
    )
