"""Validating a batch of NDJSON case lines from their bytes: the lane for lines.

msgspec decodes a batch's lines into typed cases in one call, and an output sent in canonical
form (sorted keys, no white space; here ASCII without floats, where orjson writes what RFC 8785
does) is kept as the bytes it came in rather than parsed and written again. What msgspec does
not refuse as the strict parser (app/digest/strictjson.py) does is checked over the batch's bytes:
duplicate keys (msgspec keeps the last), numbers past 2^53, escapes (none is taken). Any batch
this lane cannot take whole is parsed strictly and goes the values' way (app/ingestion/
columns.py, then the careful path), which decides and names the fault: the lane only ever
accepts, and tests hold its rows equal to that way's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import orjson
import stringzilla
from msgspec import UNSET, Raw, UnsetType
from msgspec.structs import astuple

from app.digest.strictjson import DIGITS_AS_ZEROS, LONG_DIGIT_RUN, MAX_SAFE_INTEGER
from app.ingestion.columns import PreparedColumns, column_rows
from app.ingestion.measure_lines import measure_column
from app.ingestion.rows import ValidatedBatch

if TYPE_CHECKING:
    from app.ingestion.validator import CaseValidator

_ABSENT = Raw(b"")
_NULL = Raw(b"null")


class CaseLine(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A case line's fields as typed as the decoder checks them (the rest is column_rows')."""

    # gc=False: a case line holds only strings, numbers and raw bytes, never a cycle, so the
    # collector need not track a million of them.

    check_id: str
    example_id: str
    repeat: int
    status: str
    score: float | UnsetType | None = UNSET
    output: Raw = _ABSENT
    output_digest: str | UnsetType | None = UNSET
    evidence_refs: Raw = _ABSENT
    trace_ref: Raw = _ABSENT
    scorer_version: str | UnsetType | None = UNSET
    assurance: str | UnsetType | None = UNSET
    # Kept as sent: app/ingestion/measure_lines.py reads a batch's measures from their bytes.
    measures: Raw = _ABSENT


FIELDS: tuple[str, ...] = CaseLine.__struct_fields__
_REQUIRED = ("check_id", "example_id", "status")
_OPTIONAL_TEXT = ("output_digest", "scorer_version", "assurance")
_DECODER = msgspec.json.Decoder(CaseLine)
_SORTED = orjson.OPT_SORT_KEYS


def line_rows(validator: CaseValidator, lines: list[bytes]) -> ValidatedBatch | None:
    """A batch of lines validated from their bytes, or None when the batch must go the way of
    parsed values."""
    joined = b"\n".join(lines)
    if not lines or b"\\" in joined:
        return None
    try:
        decoded = _DECODER.decode_lines(joined)
    except msgspec.DecodeError:
        return None
    count = len(lines)
    if len(decoded) != count:
        return None
    columns = dict(zip(FIELDS, map(list, zip(*map(astuple, decoded), strict=True)), strict=True))
    # Without backslashes every colon is a key's or inside a string: the keys each case's value
    # holds plus the colons of its strings and raw values must be all of them, else a key came
    # twice (the decoder keeps the last).
    keys = 4 * count
    colons = sum("".join(columns[name]).count(":") for name in _REQUIRED)
    optional = _optional_columns(columns, count)
    measures = measure_column(columns["measures"], _ABSENT, _NULL)
    if optional is None or measures is None:
        return None
    keys += optional[0] + measures.members
    colons += optional[1] + measures.colons
    columns["measures"] = measures.objects or [None] * count
    outputs = columns["output"]
    absent = outputs.count(_ABSENT)
    keys += count - absent
    written = _canonical_outputs(outputs, absent)
    if written is None:
        return None
    array, columns["output"] = written
    # StringZilla counts in SIMD lanes: about two thirds of bytes.count's time over a batch.
    if stringzilla.count(joined, b":") != keys + colons + array.count(b":"):
        return None
    return column_rows(validator, PreparedColumns(columns, measures.texts))


def _optional_columns(columns: dict[str, list[Any]], count: int) -> tuple[int, int] | None:
    """The optional columns with UNSET as None (in place): how many keys they held and how many
    colons their strings hold, or None when a score is out of range or evidence_refs or
    trace_ref carry anything but null (such batches go the way of parsed values)."""
    keys = colons = 0
    for name in (*_OPTIONAL_TEXT, "score"):
        values = columns[name]
        absent = values.count(UNSET)
        if absent < count:
            keys += count - absent
            if name != "score":
                colons += "".join([v for v in values if type(v) is str]).count(":")
            columns[name] = [None if value is UNSET else value for value in values]
        else:
            columns[name] = [None] * count
    scores = [score for score in columns["score"] if score is not None]
    if scores and max(map(abs, scores)) > MAX_SAFE_INTEGER:
        return None
    for name in ("evidence_refs", "trace_ref"):
        values = columns[name]
        absent = values.count(_ABSENT)
        if absent + values.count(_NULL) != count:
            return None
        keys += count - absent
        columns[name] = [None] * count
    return keys, colons


def _canonical_outputs(outputs: list[Raw], absent: int) -> tuple[bytes, list[bytes | None]] | None:
    """(the outputs as one JSON array, each output's bytes or None when it has none) when every
    output came in canonical form, else None."""
    if absent:
        outputs = [_NULL if raw == _ABSENT else raw for raw in outputs]
    array = b"[" + b",".join(outputs) + b"]"
    if not array.isascii():
        return None
    # Once the array is shown to be as orjson writes it, a float would be digits followed by a
    # fraction or an exponent, and an integer past 2^53 a run of 16 digits (strings that merely
    # look so send the batch the values' way).
    digits = array.translate(DIGITS_AS_ZEROS)
    if b"0." in digits or b"0e" in digits or LONG_DIGIT_RUN in digits:
        return None
    try:
        values = orjson.loads(array)
    except orjson.JSONDecodeError:
        return None
    # Each element is one value the decoder found whole, so the same count and equal bytes make
    # each output equal to its canonical form.
    if len(values) != len(outputs) or orjson.dumps(values, option=_SORTED) != array:
        return None
    if absent or _NULL in outputs:
        return array, [
            None if value is None else bytes(raw)
            for raw, value in zip(outputs, values, strict=True)
        ]
    return array, list(map(bytes, outputs))
