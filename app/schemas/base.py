"""The two base models: strict request bodies and answers read from attributes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Request bodies: no coercion between types, no unknown fields."""

    model_config = ConfigDict(strict=True, extra="forbid")


class AnswerModel(BaseModel):
    """Response bodies."""

    model_config = ConfigDict(from_attributes=True)
