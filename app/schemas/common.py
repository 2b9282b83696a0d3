"""Field types the bodies and answers share: identifiers, digests, text, cursors and JSON
numbers as strict I-JSON admits them (the base models are in app/schemas/base.py)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    SkipValidation,
    StringConstraints,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from app.digest.strictjson import MAX_SAFE_INTEGER
from app.domain.identifiers import DIGEST_PATTERN, IDENTIFIER_PATTERN

NO_NUL_PATTERN = r"^[^\u0000]*$"


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise PydanticCustomError("nul", "U+0000 (NUL) is not allowed in text")
    return value


Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
Digest = Annotated[str, StringConstraints(pattern=DIGEST_PATTERN)]
# Text that reaches a PostgreSQL text column, which cannot hold U+0000.
Text = Annotated[str, AfterValidator(_no_nul), Field(json_schema_extra={"pattern": NO_NUL_PATTERN})]
# A name, tag or id a person writes: 1 to 200 characters, no NUL.
ShortText = Annotated[Text, Field(min_length=1, max_length=200)]
# A cursor as a client sends it back: checked where it is read (app.services.kit.cursors), so
# that anything this service did not issue is a 400 with one plain sentence, never a 422.
Cursor = Annotated[str, StringConstraints(strict=True)]
# The most items a list page holds.
MAX_PAGE = 200

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
# A UUID in a JSON body (strict models take JSON strings, not uuid.UUID objects).
Uuid = Annotated[str, StringConstraints(pattern=UUID_PATTERN)]


def _integral(value: Any) -> Any:
    # JSON has one number type, and JSON Schema counts 2.0 as an integer: so does the service.
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# Integers as JSON has them: an integral float (2.0) is the integer. Written out at each use
# (not nested in another Annotated), so that the bounds stay in the JSON schema.
JSON_INT = BeforeValidator(_integral)
# What strict I-JSON admits (app.digest.strictjson): numbers within ±(2^53 − 1), text without
# U+0000.
SafeInt = Annotated[int, Field(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER), JSON_INT]
SafeFloat = Annotated[float, Field(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
# Any JSON value, documented as an unconstrained value (`{}` with a description), which every
# client generator takes whole; a recursive union of the I-JSON types made generators drop
# the operations that carry it (decision 0025). Not validated again by the models: the strict
# parser (app.digest.strictjson) has already refused every value outside strict I-JSON.
ANY_JSON_DESCRIPTION = (
    "Any JSON value. The service reads bodies as strict I-JSON: integers and other numbers"
    " within ±(2^53 − 1), no NaN or infinity, no duplicate keys, no U+0000 in text."
)
AnyJSON = Annotated[Any, SkipValidation, WithJsonSchema({"description": ANY_JSON_DESCRIPTION})]
