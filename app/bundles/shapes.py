"""The types of app/bundles/format.py's table, checked: whether a value holds a type, and the
failure a line's fields name. The Node verifier reads its copy of the same table the same way
(`compiled`, `shapeProblemOf` and `checksProblem` in verify-bundle.mjs)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from app.bundles.format import KINDS, Type

DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
MAX_SAFE_INTEGER = 2**53 - 1
_ABSENT = object()


def is_integer(value: Any) -> bool:
    """A JSON integer in 0..2^53-1 (1.0 counts: JSON has one number type)."""
    if type(value) is int:
        return 0 <= value <= MAX_SAFE_INTEGER
    return type(value) is float and value.is_integer() and 0 <= value <= MAX_SAFE_INTEGER


def is_digest(value: Any) -> bool:
    """A `sha256:<64 lowercase hex>` string."""
    return type(value) is str and DIGEST.match(value) is not None


def _object_holds(type_: Type, value: Any) -> bool:
    if type(value) is not dict:
        return False
    fields: dict[str, Type] = type_["fields"]
    if type_["exact"] and set(value) != set(fields):
        return False
    may_omit = type_["may_omit"]
    return all(
        (name in may_omit and name not in value) or holds(field, value.get(name))
        for name, field in fields.items()
    )


def _is_string(value: Any) -> bool:
    return type(value) is str


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _is_boolean(value: Any) -> bool:
    return type(value) is bool


def _is_anything(value: Any) -> bool:
    return True


_SCALARS: dict[str, Callable[[Any], bool]] = {
    "string": _is_string,
    "digest": is_digest,
    "integer": is_integer,
    "number": _is_number,
    "boolean": _is_boolean,
    "any": _is_anything,
}


def holds(type_: Type, value: Any) -> bool:
    """Whether `value` is of `type_` (a shape holds when nothing is wrong with it)."""
    name = type_["type"]
    if name in _SCALARS:
        return _SCALARS[name](value)
    if name == "nullable":
        return value is None or holds(type_["of"], value)
    if name == "list":
        return type(value) is list and all(holds(type_["of"], item) for item in value)
    if name == "one_of":
        return value in type_["values"]
    if name == "object":
        return _object_holds(type_, value)
    return problem(type_, value) is None


def problem(type_: Type, value: Any) -> str | None:
    """What is wrong with `value` as a shape (its first broken rule), or None."""
    if type(value) is not dict:
        return str(type_["message"])
    for rule in type_["rules"]:
        name, field, message = rule[:3]
        if len(rule) > 3 and name not in value:
            continue  # a field the rule lets the object leave out
        if not holds(field, value.get(name)):
            return str(message)
    return None


def _checks_problem(kind: str, value: dict[str, Any]) -> str | None:
    """The failure the first broken check of a line's fields names, or None. A field the line
    may leave out is checked only when it is there."""
    types = {field[0]: field[1] for field in KINDS[kind]["fields"]}
    for names, message in KINDS[kind]["checks"]:
        for name in names:
            field = value.get(name, _ABSENT)
            if field is _ABSENT:
                continue
            if message is None:
                found = problem(types[name], field)
                if found is not None:
                    return found
            elif not holds(types[name], field):
                return str(message)
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
