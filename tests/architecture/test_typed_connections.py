"""Read and write connections are types mypy tells apart (asyncpg-stubs types asyncpg): a read
connection handed to a bulk write, or a method no connection has, is an error under the
project's own mypy settings; a write connection is a read connection too."""

from __future__ import annotations

from pathlib import Path

from mypy import api

from tests.conftest import REPO

SNIPPET = """
from app.platform.db import ReadConnection, WriteConnection


async def bulk(connection: WriteConnection) -> None:
    await connection.copy_records_to_table("cases", records=[])


async def read(connection: ReadConnection) -> None:
    await connection.fetchval("SELECT 1")


async def misuse(reader: ReadConnection, writer: WriteConnection) -> None:
    await bulk(reader)
    await reader.no_such_method()
    await read(writer)
"""


def test_mypy_tells_read_from_write_connections(tmp_path: Path) -> None:
    source = tmp_path / "snippet.py"
    source.write_text(SNIPPET)
    out, _, status = api.run(
        [
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--follow-imports",
            "silent",
            str(source),
        ]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1, out
    assert len(errors) == 2, out
    assert 'incompatible type "ReadConnection"; expected "WriteConnection"' in errors[0]
    assert '"ReadConnection" has no attribute "no_such_method"' in errors[1]
