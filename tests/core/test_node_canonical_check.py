"""The Node verifier's check that a line is canonical (keys in order, then JSON.stringify, with
long strings compared where they stand) against rfc8785, the reference implementation."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import orjson
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bundle_helpers import node_map


def node_says_canonical(texts: list[str]) -> list[bool]:
    """Ask the Node verifier's own line check about each text."""
    return node_map("isCanonicalText", texts)


def reference(text: str) -> bool | None:
    """rfc8785's answer: the text is the canonical form of what it parses to (None for a text
    holding an integer beyond 2^53, which the verifier refuses by its number scan instead)."""
    try:
        return rfc8785.dumps(json.loads(text)) == text.encode()
    except rfc8785.IntegerDomainError:
        return None


characters = st.characters(exclude_categories=("Cs",))
keys = st.one_of(st.text(characters, max_size=5), st.integers(0, 20).map(str))
strings = st.one_of(
    st.text(characters, max_size=8),
    # Long strings (compared in place when the line has no backslash), some with what JSON
    # must escape, some with quotes or non-ASCII.
    st.text(characters, min_size=250, max_size=400),
    st.text(st.sampled_from('ab"\\é\u2028 \n'), min_size=257, max_size=300),
    st.integers(257, 600).map(lambda n: "x" * n),
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | strings
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=10,
)


def spellings(value: Any) -> list[str]:
    """The canonical text and other spellings of the same value."""
    canonical = rfc8785.dumps(value).decode()
    texts = [
        canonical,
        json.dumps(value, separators=(",", ":"), ensure_ascii=False),
        json.dumps(value, separators=(",", ":")),
        json.dumps(value),
    ]
    with contextlib.suppress(TypeError):
        texts.append(orjson.dumps(value).decode())
    # The canonical text with each long string's last character turned into an escape of itself.
    long_strings = canonical.replace('xxx"', 'xx\\u0078"')
    texts.append(long_strings)
    return texts


@settings(max_examples=60, deadline=None)
@given(st.lists(values, min_size=10, max_size=10))
def test_the_node_line_check_agrees_with_rfc8785(generated: list[Any]) -> None:
    texts = [
        text for value in generated for text in spellings(value) if reference(text) is not None
    ]
    assert node_says_canonical(texts) == [reference(text) for text in texts]


def test_integer_like_keys_and_long_strings() -> None:
    """V8 lists integer-like keys first; a long string beside them is still found in place."""
    long = "y" * 300
    texts = [
        '{"10":1,"9":2}',
        '{"9":2,"10":1}',
        '{"1":"' + long + '","a":"' + long + '"}',
        '{"a":"' + long + '","1":"' + long + '"}',
        '{"a":["' + long + '","' + long + '"],"b":"' + long + '"}',
        '{"a":"' + long + '","a":"' + long + '"}',
        '{"a":"' + long[:-1] + '","b":"' + long + 'y"}',
        '{"a":"' + long + '" ,"b":1}',
    ]
    assert node_says_canonical(texts) == [reference(text) for text in texts]


def test_texts_one_token_away_from_canonical() -> None:
    """Texts without a backslash, which the verifier checks token by token against the value
    they parse to: each but the canonical ones differs from its canonical form in one place (a
    key, a number, white space, a duplicate, the order of keys or of same-length strings)."""
    long, other = "y" * 300, "z" * 300
    texts = [
        '{"b":1,"1":1}',
        '{"1":1,"b":1}',
        '{"a":1.0}',
        '{"a":1e2}',
        '{"a":100}',
        '{"a":1E2}',
        '{"a": 1}',
        '{"a":-0}',
        '{"a":0.5}',
        '{"a":0.50}',
        '{"a":1,"a":1}',
        '{"a":"x","a":"x"}',
        '{"a":[1 ,2]}',
        "[1,2]",
        " [1]",
        "[1] ",
        '{"a":true,"b":false,"c":null}',
        '{"a":{"b":null,"a":null}}',
        '{"a":{"a":null,"b":null}}',
        '{"ab":1,"a":1}',
        '"' + long + '"',
        '{"a":"' + long + '","b":"' + other + '"}',
        '{"b":"' + long + '","a":"' + other + '"}',
        '{"a":"' + long + '","a":"' + other + '"}',
        '{"1":"' + long + '","a":"' + other + '"}',
        '{"a":"' + long + '","1":"' + other + '"}',
        '["' + long + '","' + other + '" ]',
    ]
    assert node_says_canonical(texts) == [reference(text) for text in texts]
