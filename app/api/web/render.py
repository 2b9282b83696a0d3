"""Rendering the pages: templates, and errors as pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.api.web import charts, views
from app.domain.measure_text import measures_shown
from app.domain.reports import subject_name

templates = Jinja2Templates(directory=Path(__file__).resolve().parent / "templates")
templates.env.globals.update(
    when=views.when,
    subject_name=subject_name,
    words=views.RESULT_WORDS,
    icons=views.RESULT_ICONS,
    anchor=charts.label_anchor,
    p_text=charts.p_text,
    level_text=charts.level_text,
    design_effect_text=charts.design_effect_text,
    measures_of=measures_shown,
)


def page(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    """Render a template; pages are never cached (they show a signed-in user's data)."""
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers["Cache-Control"] = "no-store"
    return response


def error_page(
    request: Request, status: int, title: str, detail: str, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """An error as a page, with the same status the API would give."""
    response = page(request, "error.html", {"title": title, "detail": detail, "me": None}, status)
    response.headers.update(headers or {})
    return response
