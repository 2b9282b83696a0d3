"""NDJSON line numbering (app/api/routers/body.py): what `ndjson_line_batches` yields, however the
body is cut into chunks, equals a plain enumeration of `body.split(b"\\n")` (blank and white-space
lines skipped but counted), and a line over the limit is refused with its own number, whether
its chunk takes the run-on numbering or the line-by-line one."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.routers.body import ndjson_line_batches
from app.domain.errors import PayloadTooLarge

LIMIT = 12
LINES = st.sampled_from(
    [b'{"a":1}', b"", b" ", b"\t\r", b"\x0b", b"x" * LIMIT, b"y" * (LIMIT + 1), b" {} ", b"[1, 2]"]
)


class _Chunked:
    """A request whose body arrives in the given pieces."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def stream(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


def _cut(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(body)) for c in cuts})
    edges = [0, *points, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges) if b > a]


def _expected(body: bytes) -> tuple[list[tuple[int, bytes]], int | None]:
    """The oracle: numbered non-blank lines up to the first too long one, and its number."""
    kept = []
    for number, line in enumerate(body.split(b"\n"), start=1):
        if len(line) > LIMIT:
            return kept, number
        if line.strip():
            kept.append((number, line))
    return kept, None


async def _read(pieces: list[bytes]) -> tuple[list[tuple[int, bytes]], int | None]:
    seen: list[tuple[int, bytes]] = []
    try:
        async for numbers, lines in ndjson_line_batches(_Chunked(pieces), LIMIT):  # type: ignore[arg-type]
            assert len(numbers) == len(lines)
            seen += zip(numbers, lines, strict=True)
    except PayloadTooLarge as refused:
        return seen, refused.index
    return seen, None


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=30), st.booleans(), st.lists(st.integers(0, 400), max_size=8))
def test_numbering_equals_a_plain_enumeration(
    lines: list[bytes], trailing_newline: bool, cuts: list[int]
) -> None:
    body = b"\n".join(lines) + (b"\n" if trailing_newline else b"")
    kept, too_long = _expected(body)
    seen, refused = asyncio.run(_read(_cut(body, cuts)))
    assert refused == too_long
    if too_long is None:
        assert seen == kept
    else:
        # Lines before the refused one may or may not have been handed on; none after it.
        assert seen == kept[: len(seen)]


@pytest.mark.parametrize(
    ("body", "numbers"),
    [
        (b'{"a":1}\n{"b":2}\n{"c":3}\n', range(1, 4)),
        (b'{"a":1}\n\n{"c":3}\n', [1, 3]),
        (b'{"a":1}\n  \n{"c":3}\n', [1, 3]),
    ],
)
def test_a_chunk_without_blank_lines_is_numbered_by_a_range(
    body: bytes, numbers: range | list[int]
) -> None:
    async def first() -> object:
        async for batch_numbers, _ in ndjson_line_batches(_Chunked([body]), LIMIT):  # type: ignore[arg-type]
            return batch_numbers
        return None

    assert asyncio.run(first()) == numbers
