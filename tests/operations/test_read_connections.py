"""The read pool's connection context (app/platform/db.py `reading`): a connection handed back after a
read goes back to the pool, and one whose backend went away under its user is closed rather
than handed to the next reader."""

from __future__ import annotations

import asyncpg
import pytest

from app.platform.config import to_plain_url
from app.platform.db import ReaderConnection, reading

# Depends on the server's own behaviour: run again on the external PostgreSQL.
pytestmark = pytest.mark.server


async def _pool(database_url: str) -> asyncpg.Pool:
    return await asyncpg.create_pool(
        to_plain_url(database_url), min_size=1, max_size=1, connection_class=ReaderConnection
    )


async def test_a_read_hands_its_connection_back(database_url: str) -> None:
    pool = await _pool(database_url)
    try:
        async with reading(pool) as connection:
            backend = await connection.fetchval("SELECT pg_backend_pid()")
        async with reading(pool) as connection:
            assert await connection.fetchval("SELECT pg_backend_pid()") == backend
    finally:
        await pool.close()


async def test_a_connection_that_broke_is_closed_not_reused(database_url: str) -> None:
    pool = await _pool(database_url)
    killer = await asyncpg.connect(to_plain_url(database_url))
    try:
        # Which error comes depends on when the driver reads the backend's farewell: a lost
        # connection, or a protocol left mid-operation (the case the pool must not reuse).
        broken = (
            asyncpg.PostgresConnectionError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
            OSError,
        )
        with pytest.raises(broken):
            async with reading(pool) as connection:
                backend = await connection.fetchval("SELECT pg_backend_pid()")
                await killer.execute("SELECT pg_terminate_backend($1)", backend)
                await connection.fetchval("SELECT 1")
        async with reading(pool) as connection:
            assert await connection.fetchval("SELECT pg_backend_pid()") != backend
    finally:
        await killer.close()
        await pool.close()


async def test_an_error_of_the_reader_leaves_the_connection_in_the_pool(database_url: str) -> None:
    pool = await _pool(database_url)
    try:
        with pytest.raises(ZeroDivisionError):
            async with reading(pool) as connection:
                backend = await connection.fetchval("SELECT pg_backend_pid()")
                raise ZeroDivisionError
        async with reading(pool) as connection:
            assert await connection.fetchval("SELECT pg_backend_pid()") == backend
    finally:
        await pool.close()
