"""The measures of a batch of NDJSON lines, read from the bytes each case sent them as.

A batch whose cases all send the same measure names in canonical form (RFC 8785: sorted names,
numbers as ECMAScript writes them), as the importer does, keeps those bytes as each case's
measures text: a few passes over the batch's bytes check them, and no object is built per
case. Any other batch has its measures decoded (msgspec, in C) into objects, which
app/ingestion/leaves.py checks and writes canonically; a batch that cannot be decoded so goes
the values' way, where the careful path names the fault.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson
import stringzilla
from msgspec import Raw

from app.digest.merkle import measures_text
from app.domain.measures import measures_problem

# What a number without sign or exponent is made of; names holding none of it are kept whole
# when a batch's measures are stripped of their numbers.
_NUMBER_BYTES = b"0123456789."
# Each number byte as `0`, each colon kept, every other byte as `x`: a value's first digit
# follows its colon, so `x0` is a digit or a point in a name.
_MARKS = bytes(48 if byte in _NUMBER_BYTES else 58 if byte == 58 else 120 for byte in range(256))
_IN_NAME = b"x0"
# A number token of 16 or more characters after its colon: up to 15 digits every decimal is the
# shortest form of its double (the form ECMAScript writes); longer ones are written again, the
# careful way. (The colon makes the needle rare: a search for sixteen marks alone stops at
# every pair of numbers sixteen bytes apart, and costs three times as much.)
_LONG_NUMBER = b":" + b"0" * 16
# Below 1e-6 ECMAScript writes an exponent, so such a number sent in decimals is not canonical.
_TINY_NUMBER = b":0.000000"
# A fraction ending in a zero (`1.50`, `2.0`) is not the shortest form (the digits taken
# possessively, then the last one looked at: twice as fast as backtracking).
_TRAILING_ZERO = re.compile(rb"\.[0-9]*+(?<=0)[,}]")
_OBJECTS = msgspec.json.Decoder(list[dict[str, int | float] | None])


@dataclass(frozen=True, slots=True)
class MeasureColumn:
    """A batch's measures: how many cases sent the member and the colons its bytes hold (for
    the lane's count of keys), and either each case's canonical text kept as sent (`texts`) or
    each case's decoded object, None for none (`objects`)."""

    members: int
    colons: int
    texts: list[str | None] | None = None
    objects: list[dict[str, Any] | None] | None = None


def measure_column(raws: list[Raw], absent: Raw, null: Raw) -> MeasureColumn | None:
    """The measures column of a batch (each case's raw value, `absent` where it sent none), or
    None when a name holds a colon or the values are not objects of numbers (such a batch goes
    the values' way)."""
    count = len(raws)
    first = raws[0]
    # A batch kept as sent has every case's measures in the first case's shape (kept_texts
    # checks it), so none is absent or null: such a batch is not scanned for them first.
    if first != absent and first != null:
        kept = kept_texts(raws)
        if kept is not None:
            return MeasureColumn(count, kept[1], texts=kept[0])
    missing = raws.count(absent)
    if missing == count:
        return MeasureColumn(0, 0, objects=[None] * count)
    return _decoded(raws, (absent, null), count - missing)


def kept_texts(raws: list[Raw]) -> tuple[list[str | None], int] | None:
    """(each case's measures text, the colons they hold) when every case sent the first case's
    names in canonical form, else None."""
    first = bytes(raws[0])
    shape = first.translate(None, _NUMBER_BYTES)
    names = _KEPT_SHAPES.get(shape) or _canonical_names(first)
    if names is None:
        return None
    joined = b"\n".join(raws)
    # With its numbers taken out every case must read as the first: the same names in the same
    # order, and each value a token of digits and points, which JSON reads only as a number
    # without sign or exponent (the decoder has checked that each value is JSON).
    if joined.translate(None, _NUMBER_BYTES) != _shapes(shape, len(raws)):
        return None
    # No case's names hold a digit or a point (which the stripping above would not tell apart
    # from the first's names), and no number is too long. StringZilla maps and searches the
    # bytes in SIMD lanes, ten times faster than bytes.translate and bytes.count here.
    marks = stringzilla.translate(joined, _MARKS)
    if stringzilla.contains(marks, _IN_NAME) or stringzilla.contains(marks, _LONG_NUMBER):
        return None
    if stringzilla.contains(joined, _TINY_NUMBER) or _TRAILING_ZERO.search(joined) is not None:
        return None
    texts: list[Any] = joined.decode().split("\n")
    if shape not in _KEPT_SHAPES and len(_KEPT_SHAPES) < _KEPT_SHAPES_REMEMBERED:
        _KEPT_SHAPES[shape] = names
    return texts, names * len(raws)


@functools.lru_cache(maxsize=64)
def _shapes(shape: bytes, count: int) -> bytes:
    """`count` cases of one shape, a line each (batches mostly repeat both)."""
    return b"\n".join(itertools.repeat(shape, count))


# Shapes (a first case's measures without their numbers) of batches kept as sent, with how many
# names they hold: a request's batches mostly repeat one shape. A kept batch's names hold no
# digit or point, so its shape is its names; a first case of that shape whose names hold none
# either (kept_texts refuses any other) names the same, and its values are checked as every
# case's are.
_KEPT_SHAPES: dict[bytes, int] = {}
_KEPT_SHAPES_REMEMBERED = 64


def _canonical_names(first: bytes) -> int | None:
    """How many measures the first case names, when they are well formed, written canonically
    and their names hold no colon (each colon then ends a name); else None. (Names holding a
    digit or a point are refused with every case's, by kept_texts.)"""
    try:
        measures = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None
    if type(measures) is not dict or not measures or measures_problem(measures) is not None:
        return None
    if first.count(b":") != len(measures):
        return None
    # A name sent twice is kept once by the parser, so its text is not the bytes sent.
    return len(measures) if measures_text(measures) == first.decode() else None


def _decoded(raws: list[Raw], marks: tuple[Raw, Raw], members: int) -> MeasureColumn | None:
    """The measures decoded into objects (None for none), or None when a value is not an
    object of numbers or a name holds a colon."""
    if members < len(raws):
        absent, null = marks
        raws = [null if raw == absent else raw for raw in raws]
    array = b"[" + b",".join(raws) + b"]"
    try:
        objects = _OBJECTS.decode(array)
    except msgspec.DecodeError:
        return None
    present = [measures for measures in objects if measures is not None]
    if any(":" in name for name in set().union(*present)):
        return None
    # Without colons in names there is one a name: fewer names decoded than colons sent means
    # a name came twice (the decoder keeps the last), which the careful path refuses.
    colons = array.count(b":")
    if colons != sum(map(len, present)):
        return None
    return MeasureColumn(members, colons, objects=objects)
