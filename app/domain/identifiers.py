"""The forms of identifiers and digests, as patterns (for the schemas) and compiled (for code
that checks a value without Pydantic, such as the ingestion lanes)."""

from __future__ import annotations

import re

IDENTIFIER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$"
IDENTIFIER_RE = re.compile(IDENTIFIER_PATTERN)
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
# What an evaluation is of: "<algorithm>:<lowercase hex>", a git commit "sha1:4f1c…" for one.
SUBJECT_DIGEST_PATTERN = r"^[a-z0-9][a-z0-9-]{0,31}:[0-9a-f]{8,256}$"
SUBJECT_DIGEST_RE = re.compile(SUBJECT_DIGEST_PATTERN)
# Python checks use fullmatch: "$" also matches before a final newline.
DIGEST_RE = re.compile(DIGEST_PATTERN)
