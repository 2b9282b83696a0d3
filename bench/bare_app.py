"""The framework's ceiling: a bare FastAPI endpoint returning fixed bytes from memory."""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI, Response

PAYLOAD = Path(os.environ["BARE_PAYLOAD"]).read_bytes()
app = FastAPI()


@app.get("/bare")
async def bare() -> Response:
    """The same bytes every time."""
    return Response(content=PAYLOAD, media_type="application/json")
