"""Shared field types and the strict base model."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints

IDENTIFIER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$"
IDENTIFIER_RE = re.compile(IDENTIFIER_PATTERN)
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
DIGEST_RE = re.compile(DIGEST_PATTERN)
SUBJECT_DIGEST_PATTERN = r"^[a-z0-9][a-z0-9-]{0,31}:[0-9a-f]{8,256}$"

Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]
JSONValue = Any


class StrictModel(BaseModel):
    """Request bodies: no coercion between types, no unknown fields."""

    model_config = ConfigDict(strict=True, extra="forbid")


class AnswerModel(BaseModel):
    """Response bodies."""

    model_config = ConfigDict(from_attributes=True)
