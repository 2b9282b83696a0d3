"""The forms of identifiers and digests, as patterns (for the schemas) and compiled (for code
that checks a value without Pydantic, such as the ingestion lanes)."""

from __future__ import annotations

import re

IDENTIFIER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$"
IDENTIFIER_RE = re.compile(IDENTIFIER_PATTERN)
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
# Python checks use fullmatch: "$" also matches before a final newline.
DIGEST_RE = re.compile(DIGEST_PATTERN)
