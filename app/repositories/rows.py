"""Rows of mapped tables read and written in plain SQL on the session's own connection.

Issuing a small report runs about twenty statements in three requests, and building each one
through the ORM (statement objects, cache keys, the unit of work, a greenlet hop) cost more CPU
than everything else the requests do (issue 56). The issuing path's statements are written
here once as SQL text instead: asyncpg prepares each text once per connection, and a row read
becomes an instance of its mapped class, detached from the session (read it; write through
a statement, never through its attributes).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import DeclarativeBase

from app.repositories.raw import driver_of

ModelT = TypeVar("ModelT", bound=DeclarativeBase)


@functools.cache
def _shape(model: type[DeclarativeBase]) -> tuple[str, tuple[str, ...]]:
    """`SELECT <every column> FROM <table>` of a mapped class, and its attribute names."""
    table = model.__table__
    assert isinstance(table, Table)
    mapper = model.__mapper__
    names = tuple(mapper.get_property_by_column(column).key for column in table.columns)
    listed = ", ".join(f'"{column.name}"' for column in table.columns)
    return f'SELECT {listed} FROM "{table.name}"', names


def select_from(model: type[DeclarativeBase]) -> str:
    """The select list and FROM clause of a mapped class's rows, to which a WHERE is added."""
    return _shape(model)[0]


async def one(session: AsyncSession, model: type[ModelT], sql: str, *args: object) -> ModelT | None:
    """The one row `sql` (which selects `select_from(model)`) finds, as a detached instance."""
    row = await (await driver_of(session)).fetchrow(sql, *args)
    if row is None:
        return None
    return model(**dict(zip(_shape(model)[1], row, strict=True)))


async def every(
    session: AsyncSession, model: type[ModelT], sql: str, *args: object
) -> list[ModelT]:
    """Every row `sql` (which selects `select_from(model)`) finds, as detached instances."""
    names = _shape(model)[1]
    rows = await (await driver_of(session)).fetch(sql, *args)
    return [model(**dict(zip(names, row, strict=True))) for row in rows]


@functools.cache
def _insert_sql(table: Table, names: tuple[str, ...], suffix: str) -> str:
    listed = ", ".join(f'"{table.c[name].name}"' for name in names)
    marks = ", ".join(f"${i}" for i in range(1, len(names) + 1))
    return f'INSERT INTO "{table.name}" ({listed}) VALUES ({marks}){suffix}'


def _with_defaults(table: Table, values: Mapping[str, Any]) -> dict[str, Any]:
    """The values with the Python-side defaults of the columns they leave out, as the ORM's
    insert would fill them in (server defaults are the database's)."""
    full = dict(values)
    for column in table.columns:
        if column.key in full or column.default is None:
            continue
        default = column.default
        if default.is_scalar:
            full[column.key] = default.arg  # type: ignore[attr-defined]
        elif default.is_callable:
            # SQLAlchemy wraps a default's callable to take the execution context.
            full[column.key] = default.arg(None)  # type: ignore[attr-defined]
    return full


async def insert(
    session: AsyncSession, model: type[DeclarativeBase], values: Mapping[str, Any], suffix: str = ""
) -> Any:
    """Insert one row (`suffix`: an ON CONFLICT or RETURNING clause); the first value of what
    it returns, if anything."""
    table = model.__table__
    assert isinstance(table, Table)
    full = _with_defaults(table, values)
    names = tuple(full)
    driver = await driver_of(session)
    return await driver.fetchval(_insert_sql(table, names, suffix), *full.values())


async def insert_many(
    session: AsyncSession, model: type[DeclarativeBase], rows: Sequence[Mapping[str, Any]]
) -> None:
    """Insert rows that all name the same columns, in one pipelined round trip."""
    if not rows:
        return
    table = model.__table__
    assert isinstance(table, Table)
    full = [_with_defaults(table, row) for row in rows]
    names = tuple(full[0])
    driver = await driver_of(session)
    await driver.executemany(_insert_sql(table, names, ""), [tuple(row.values()) for row in full])
