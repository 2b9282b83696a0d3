"""The types of app/bundles/format.py's table, checked: whether a value holds a type, and the
failure a line's fields name. The Node verifier reads its copy of the same table the same way
(`compiled`, `shapeProblemOf` and `checksProblem` in verify-bundle.mjs)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from app.bundles.format import FIELD_TYPES, KINDS, Type
from app.domain.measures import measures_problem

DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
MAX_SAFE_INTEGER = 2**53 - 1


def is_integer(value: Any) -> bool:
    """A JSON integer in 0..2^53-1 (1.0 counts: JSON has one number type)."""
    if type(value) is int:
        return 0 <= value <= MAX_SAFE_INTEGER
    return type(value) is float and value.is_integer() and 0 <= value <= MAX_SAFE_INTEGER


def is_digest(value: Any) -> bool:
    """A `sha256:<64 lowercase hex>` string."""
    return type(value) is str and DIGEST.match(value) is not None


Test = Callable[[Any], bool]
Problem = Callable[[Any], "str | None"]


def _is_string(value: Any) -> bool:
    return type(value) is str


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _is_boolean(value: Any) -> bool:
    return type(value) is bool


def _is_anything(value: Any) -> bool:
    return True


def _is_measures(value: Any) -> bool:
    return type(value) is dict and measures_problem(value) is None


_SCALARS: dict[str, Test] = {
    "string": _is_string,
    "digest": is_digest,
    "integer": is_integer,
    "number": _is_number,
    "boolean": _is_boolean,
    "any": _is_anything,
    "measures": _is_measures,
}


def _object_test(type_: Type) -> Test:
    keys = set(type_["fields"])
    exact = type_["exact"]
    fields = [
        (name, compiled(field), name in type_["may_omit"])
        for name, field in type_["fields"].items()
    ]

    def test(value: Any) -> bool:
        if type(value) is not dict or (exact and set(value) != keys):
            return False
        return all(
            (may_omit and name not in value) or field_test(value.get(name))
            for name, field_test, may_omit in fields
        )

    return test


def compiled(type_: Type) -> Test:
    """The predicate of a type of the table: whether a value is of it (a shape holds when
    nothing is wrong with it). Compiled once per type, so a line's checks cost no lookups."""
    name = type_["type"]
    if name in _SCALARS:
        return _SCALARS[name]
    if name == "nullable":
        of = compiled(type_["of"])
        return lambda value: value is None or of(value)
    if name == "list":
        item = compiled(type_["of"])
        return lambda value: type(value) is list and all(map(item, value))
    if name == "one_of":
        values = type_["values"]
        return lambda value: value in values
    if name == "object":
        return _object_test(type_)
    problem = shape_problem(type_)
    return lambda value: problem(value) is None


def shape_problem(type_: Type) -> Problem:
    """What is wrong with a value as a shape (its first broken rule), or None; compiled."""
    message = str(type_["message"])
    rules = [(rule[0], compiled(rule[1]), str(rule[2]), len(rule) > 3) for rule in type_["rules"]]

    def problem(value: Any) -> str | None:
        if type(value) is not dict:
            return message
        for name, rule_test, broken, may_omit in rules:
            if may_omit and name not in value:
                continue  # a field the rule lets the object leave out
            if not rule_test(value.get(name)):
                return broken
        return None

    return problem


def holds(type_: Type, value: Any) -> bool:
    """Whether `value` is of `type_` (compiles the type: for one-off checks)."""
    return compiled(type_)(value)


def _kind_checks(kind: str) -> list[tuple[str, str | None, Callable[[Any], Any]]]:
    """A kind's checks, a field each: (name, its failure or None when its shape names it, the
    predicate or the shape's problem)."""
    types = FIELD_TYPES[kind]
    return [
        (name, message, shape_problem(types[name]) if message is None else compiled(types[name]))
        for names, message in KINDS[kind]["checks"]
        for name in names
    ]


_KIND_CHECKS = {kind: _kind_checks(kind) for kind in KINDS}


def _checks_problem(kind: str, value: dict[str, Any]) -> str | None:
    """The failure the first broken check of a line's fields names, or None. A field the line
    may leave out is checked only when it is there."""
    for name, message, test in _KIND_CHECKS[kind]:
        if name not in value:
            continue
        if message is None:
            found: str | None = test(value[name])
            if found is not None:
                return found
        elif not test(value[name]):
            return message
    return None


def line_problem(kind: str, value: dict[str, Any]) -> str | None:
    """What is wrong with the types of an admitted line's fields, or None (a case line's types
    are checked later, by `case_problem`)."""
    if KINDS[kind].get("checked") == "later":
        return None
    return _checks_problem(kind, value)


def case_problem(value: dict[str, Any]) -> str | None:
    """What is wrong with a case line's field types, or None."""
    return _checks_problem("case", value)
