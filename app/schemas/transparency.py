"""The transparency log's answers and the witness's cosignature (docs/transparency.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from app.schemas.common import Text


class CosignatureIn(BaseModel):
    """A checkpoint this log cut, as a C2SP note carrying the witness's cosignature lines."""

    model_config = {"extra": "forbid"}

    note: Text = Field(
        max_length=16_384,
        description="the checkpoint note (origin, size, root, a blank line) with the witness's "
        "cosignature lines",
    )


class CosignatureOut(BaseModel):
    """The tree size of the checkpoint whose cosignatures were kept."""

    tree_size: int


class ReportLog(BaseModel):
    """A report's entry in the transparency log and its proof."""

    report_id: str
    index: int
    entry: dict[str, Any]
    checkpoint: str | None = Field(description="the newest checkpoint (a C2SP signed note)")
    tree_size: int | None = None
    inclusion_proof: list[str] | None = Field(
        description="RFC 9162 inclusion proof, base64 hashes nearest the leaf first"
    )
