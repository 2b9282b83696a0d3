"""What a bundle line must be before it is parsed (docs/bundles.md, "Strictness").

Both verifiers apply these checks in this order with the same patterns, so that no parser's
leniency (a BOM skipped, a lone surrogate kept, 2^53 + 1 rounded, 1e400 read as infinity, a
3,000-deep array) decides what a line means. The cheap scans run on every line; the exact
token scans only on lines they flag.
"""

from __future__ import annotations

import re
from typing import Any

from app.digest.strictjson import DIGITS_AS_ZEROS, LONG_DIGIT_RUN, MAX_SAFE_INTEGER

BOM = b"\xef\xbb\xbf"
MAX_DEPTH = 100
_EXACT = 2**53
_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F]")
# A JSON string or number token: strings are skipped whole, so nothing inside one is read
# as structure, a number, or an escape of another string.
_TOKEN = re.compile(
    rb'"[^"\\]*(?:\\.[^"\\]*)*"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|[\[\]{}]'
)
_ESCAPE = re.compile(rb"\\(u[0-9a-fA-F]{4}|.)")


def _surrogate_escape(data: bytes) -> bool:
    for token in _TOKEN.finditer(data):
        text = token.group()
        if text[:1] != b'"':
            continue
        for escape in _ESCAPE.finditer(text[1:-1]):
            code = escape.group(1)
            if code[:1] == b"u" and 0xD800 <= int(code[1:], 16) <= 0xDFFF:
                return True
    return False


def _too_deep(data: bytes) -> bool:
    depth = 0
    for token in _TOKEN.finditer(data):
        text = token.group()
        if text in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif text in (b"]", b"}"):
            depth -= 1
    return False


def number_problem(data: bytes) -> str | None:
    """An integer beyond ±(2^53 - 1) or a number beyond the double range, by the exact scan."""
    for token in _TOKEN.finditer(data):
        text = token.group()
        if text[:1] == b'"' or text in (b"[", b"]", b"{", b"}"):
            continue
        if not any(c in text for c in b".eE"):
            if abs(int(text)) > MAX_SAFE_INTEGER:
                return f"an integer beyond ±(2^53 − 1): {text[:40].decode()}"
        elif float(text) in (float("inf"), float("-inf")):
            return f"a number beyond the double range: {text[:40].decode()}"
    return None


def holds_large_number(value: Any) -> bool:
    """Whether a parsed value holds a number of magnitude 2^53 or more."""
    kind = type(value)
    if kind is int or kind is float:
        return bool(abs(value) >= _EXACT)
    if kind is dict:
        value = value.values()
    elif kind is not list:
        return False
    # Strings, most of a line's values (digests, texts), are passed over without a call.
    return any(holds_large_number(item) for item in value if type(item) is not str)


def may_hold_surrogate_escape(data: bytes) -> bool:
    """Whether the bytes hold what may be a \\u escape of a surrogate (the cheap hint)."""
    # A backslash is found by memchr; the two-byte search only runs on lines that have one.
    return b"\\" in data and _SURROGATE_HINT.search(data) is not None


# The hint only decides whether the exact token scan may be needed: a run of 16 digits (an
# integer beyond 2^53 needs one). On a hinted line that parses, the scan runs when the parsed
# value holds a number at or beyond 2^53 (orjson reads integers up to 2^64 exactly and larger
# ones as floats, so none slips by); a number beyond the double range makes orjson refuse the
# line, and every line it refuses gets the exact scan too (number_problem), so no parser's
# reading of 1e400 or of 2^53 + 1 decides the outcome.
def may_hold_long_number(data: bytes) -> bool:
    """Whether the line has a run of 16 digits (the cheap hint for `parsed_number_problem`)."""
    return LONG_DIGIT_RUN in data.translate(DIGITS_AS_ZEROS)


def parsed_number_problem(data: bytes, value: Any) -> str | None:
    """For a hinted line that parsed: `number_problem` when the value holds a number the
    exact scan must judge, else None."""
    return number_problem(data) if holds_large_number(value) else None


def line_problem(data: bytes) -> tuple[str, str] | None:
    """(code, what) for a line refused before parsing, else None. A BOM is reported here
    too; the caller strips it and reads on (only a BOM leaves the rest of the line usable).
    Numbers are judged afterwards: on a hinted line that parsed by `parsed_number_problem`,
    on a line the parser refuses by `number_problem`, before it is called no JSON."""
    if data.startswith(BOM):
        return "encoding", "a UTF-8 byte order mark"
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "encoding", "not UTF-8"
    if may_hold_surrogate_escape(data) and _surrogate_escape(data):
        return "encoding", "a \\u escape of a UTF-16 surrogate"
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH and _too_deep(data):
        return "limits", f"nesting deeper than {MAX_DEPTH}"
    return None
