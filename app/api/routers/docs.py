"""The interactive API documentation, served with its assets from an installed package (no
outside request: it works offline and behind a strict egress policy). No ReDoc: it fetches
its logo from a CDN."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
ASSETS_PATH = "/docs-assets"
TITLE = "EvalBook Reports"

router = APIRouter(include_in_schema=False)


def assets() -> StaticFiles:
    """Swagger UI, as the fastapi-offline package ships it."""
    return StaticFiles(directory=ASSETS)


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    """Swagger UI over /openapi.json."""
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title=f"{TITLE}: API",
        swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
    )
