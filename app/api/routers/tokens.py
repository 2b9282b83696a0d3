"""Tokens created by an admin token of the same project."""

from __future__ import annotations

from fastapi import APIRouter, status

from app.api.access import Admin
from app.api.deps import Session
from app.api.routers.route import EdgeRoute, body_example
from app.schemas.problems import AUTHENTICATED, BODY
from app.schemas.tokens import TokenIn, TokenOut
from app.services import projects as service

router = APIRouter(
    prefix="/api/v1", tags=["tokens"], route_class=EdgeRoute, responses=AUTHENTICATED
)


@router.post(
    "/tokens",
    status_code=status.HTTP_201_CREATED,
    response_model=TokenOut,
    responses=BODY,
    openapi_extra=body_example(
        {
            "name": "ci",
            "permissions": ["evaluation.write"],
            "kind": "runner",
            "assurance": "reported",
        }
    ),
)
async def create_token(body: TokenIn, principal: Admin, session: Session) -> TokenOut:
    """Create a token in the admin's project; the secret is shown once."""
    return await service.create_token_for_admin(session, principal, body)
