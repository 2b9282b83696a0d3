"""The measures of a batch of lines kept as the bytes sent (app/ingestion/measure_lines.py): only
bytes already canonical are kept, and the rows are the careful path's either way."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import Raw

from app.digest.merkle import measures_text
from app.domain.errors import ProblemError
from app.ingestion import measure_lines, validate_batch
from app.ingestion.lines import line_rows
from app.ingestion.measure_lines import MeasureColumn, kept_texts, measure_column
from tests.ingestion.test_lines import PLAIN, careful_lines, validator

_ABSENT = Raw(b"")
_NULL = Raw(b"null")


def _lines(measures: list[bytes]) -> list[bytes]:
    """A line a case, each with the measures bytes given."""
    return [
        b'{"check_id":"pass","example_id":"%s","measures":%s,"repeat":0,"status":"pass"}'
        % (PLAIN[i % len(PLAIN)].encode(), raw)
        for i, raw in enumerate(measures)
    ]


def _same_rows_as_careful(measures: list[bytes]) -> None:
    """The lanes build the careful path's rows, or refuse as it does."""
    lines = _lines(measures)[: len(PLAIN)]
    slow = careful_lines(lines)
    if slow is None:
        with pytest.raises(ProblemError):
            validate_batch(validator(), range(1, len(lines) + 1), lines)
        return
    assert validate_batch(validator(), range(1, len(lines) + 1), lines).rows == slow.rows
    fast = line_rows(validator(), lines)
    assert fast is None or fast.rows == slow.rows


CANONICAL = [
    b'{"cost_usd":0.0004123,"input_tokens":812,"latency_ms":1840.25,"output_tokens":230}',
    b'{"cost_usd":0.000001,"input_tokens":0,"latency_ms":999999999999999,"output_tokens":1}',
    b'{"cost_usd":12.5,"input_tokens":100000,"latency_ms":0.5,"output_tokens":10}',
]


def test_canonical_measures_are_kept_as_sent() -> None:
    raws = [Raw(raw) for raw in CANONICAL]
    column = measure_column(raws, _ABSENT, _NULL)
    assert column is not None
    assert column.texts == [raw.decode() for raw in CANONICAL]
    assert column.texts == [measures_text(orjson.loads(raw)) for raw in CANONICAL]
    assert (column.members, column.colons) == (3, 12)
    _same_rows_as_careful(CANONICAL * 2)


# Each a batch whose first case is canonical and whose last is not what the first is, or not
# canonical: none may be kept as sent.
NOT_KEPT = {
    "names unsorted": b'{"input_tokens":1,"cost_usd":1,"latency_ms":1,"output_tokens":1}',
    "integral float": b'{"cost_usd":1.0,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "trailing zero": b'{"cost_usd":1.50,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "tiny in decimals": b'{"cost_usd":0.0000001,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "exponent": b'{"cost_usd":1e-7,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "sixteen digits": b'{"cost_usd":1234567890123456,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "long fraction": b'{"cost_usd":0.30000000000000004,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "spaced": b'{"cost_usd": 1,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "a name fewer": b'{"cost_usd":1,"input_tokens":1,"latency_ms":1}',
    "a name more": b'{"cost_usd":1,"input_tokens":1,"latency_ms":1,"output_tokens":1,"z":1}',
    # Digits put into names strip to the first case's names, in an order that is not sorted.
    "digits in names": b'{"cost_usd":1,"input_tokens":1,"latency_ms":1,"out9put_tokens":1}',
    "digits unsorted": b'{"cost_usd":1,"in9put_tokens":1,"in1atency_ms":1,"output_tokens":1}',
    "point in a name": b'{"cost_usd":1,"input.tokens":1,"latency_ms":1,"output_tokens":1}',
    "name twice": b'{"cost_usd":1,"cost_usd":1,"latency_ms":1,"output_tokens":1}',
    "negative": b'{"cost_usd":-1,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "string": b'{"cost_usd":"1","input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "null value": b'{"cost_usd":null,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "boolean": b'{"cost_usd":true,"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "array": b'{"cost_usd":[1],"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "object": b'{"cost_usd":{"a":1},"input_tokens":1,"latency_ms":1,"output_tokens":1}',
    "empty": b"{}",
    "not an object": b"[1,2]",
}


@pytest.mark.parametrize("odd", NOT_KEPT.values(), ids=list(NOT_KEPT))
def test_measures_not_canonical_are_not_kept(odd: bytes) -> None:
    assert kept_texts([Raw(CANONICAL[0]), Raw(odd)]) is None
    _same_rows_as_careful([CANONICAL[0], odd])


@pytest.mark.parametrize("odd", NOT_KEPT.values(), ids=list(NOT_KEPT))
def test_a_shape_found_canonical_before_keeps_nothing_else(
    odd: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first case's names are remembered by its shape: a later first case of that shape
    # whose values, or the digits in whose names, are not canonical is still not kept.
    monkeypatch.setattr(measure_lines, "_KEPT_SHAPES", {})
    alone = kept_texts([Raw(odd)])
    assert kept_texts([Raw(CANONICAL[0])]) is not None
    assert kept_texts([Raw(odd), Raw(CANONICAL[0])]) is None
    assert kept_texts([Raw(odd)]) == alone
    _same_rows_as_careful([odd, CANONICAL[0]])


def test_a_refused_batch_leaves_its_shape_unremembered(monkeypatch: pytest.MonkeyPatch) -> None:
    # `{"a":1,"a1":2}` has canonical names but a digit in one: its shape, `{"a":,"a":}`, would
    # let a later `{"a":1,"a":2}` (a name twice, which the careful path refuses) be kept.
    monkeypatch.setattr(measure_lines, "_KEPT_SHAPES", {})
    assert kept_texts([Raw(b'{"a":1,"a1":2}')]) is None
    assert kept_texts([Raw(b'{"a":1,"a":2}')]) is None
    _same_rows_as_careful([b'{"a":1,"a":2}', b'{"a":1,"a":2}'])


@pytest.mark.parametrize(
    "first", [b'{"a1":1,"b":2}', b'{"a.b":1}', b'{"a:b":1}', b'{"b":1,"a":2}', b"{}"]
)
def test_a_first_case_not_plain_is_not_a_template(first: bytes) -> None:
    assert kept_texts([Raw(first), Raw(first)]) is None
    _same_rows_as_careful([first, first])


def test_absent_or_null_measures_go_the_decoded_way() -> None:
    raws = [Raw(CANONICAL[0]), _ABSENT, _NULL]
    column = measure_column(raws, _ABSENT, _NULL)
    assert column is not None and column.texts is None
    assert column.objects == [orjson.loads(CANONICAL[0]), None, None]
    # The first case's measures present or not, a later one absent or null: never kept.
    for raws in (
        [_NULL, Raw(CANONICAL[0])],
        [Raw(CANONICAL[0]), _NULL],
        [_ABSENT, Raw(CANONICAL[1])],
    ):
        column = measure_column(raws, _ABSENT, _NULL)
        assert column is not None and column.texts is None
        assert column.objects == [
            None if raw in (_ABSENT, _NULL) else orjson.loads(bytes(raw)) for raw in raws
        ]
    assert measure_column([_ABSENT, _ABSENT], _ABSENT, _NULL) == MeasureColumn(
        0, 0, objects=[None, None]
    )


_NAMES = st.text(alphabet="ab9._-", min_size=1, max_size=4)
_NUMBERS = st.from_regex(r"\A(0|[1-9][0-9]{0,17})(\.[0-9]{1,9})?\Z", fullmatch=True)


@st.composite
def _measure_bytes(draw: Any) -> bytes:
    """Measures written by hand: any names of a few characters, any number tokens, any order."""
    names = draw(st.lists(_NAMES, min_size=1, max_size=4))
    members = [f'"{name}":{draw(_NUMBERS)}' for name in names]
    return ("{" + ",".join(members) + "}").encode()


@settings(max_examples=300, deadline=None)
@given(st.lists(_measure_bytes(), min_size=1, max_size=6))
def test_kept_bytes_are_rfc8785s_and_the_rows_the_careful_paths(measures: list[bytes]) -> None:
    kept = kept_texts([Raw(raw) for raw in measures])
    if kept is not None:
        # An implementation we did not write holds every kept text canonical.
        assert [text.encode() for text in kept[0]] == [  # type: ignore[union-attr]
            rfc8785.dumps(orjson.loads(raw)) for raw in measures
        ]
    _same_rows_as_careful(measures)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["cost_usd", "latency_ms", "tokens"]),
            st.one_of(
                st.integers(0, 10**15 - 1),
                st.floats(0, 1e9, allow_nan=False),
            ),
            min_size=3,
        ),
        min_size=2,
        max_size=6,
    )
)
def test_measures_written_canonically_are_kept(measures: list[dict[str, float]]) -> None:
    written = [measures_text(m).encode() for m in measures]  # type: ignore[union-attr]
    kept = kept_texts([Raw(raw) for raw in written])
    tokens = [
        token for raw in written for token in raw.decode().strip("{}").replace(":", ",").split(",")
    ][1::2]
    if all(len(t) < 16 and "e" not in t for t in tokens):
        assert kept is not None
        assert kept[0] == [raw.decode() for raw in written]
    _same_rows_as_careful(written)
