"""What the command line checks before it starts work, so that a newcomer's first mistakes are
one line naming the next step, not a traceback: a data directory that is not there, a port in
use, a database out of reach or not migrated."""

from __future__ import annotations

import asyncio
import errno
import socket
from pathlib import Path

import asyncpg
from alembic.script import ScriptDirectory

from app.platform.config import to_asyncpg_url, to_plain_url


class PreflightFailed(ValueError):
    """A check before the work failed; the message says what to do."""


def require_data_dir(data_dir: Path) -> None:
    """The embedded database's data directory exists (commands other than `serve` and
    `migrate` never create one: a listing creates nothing)."""
    if not (data_dir / "postgres" / "PG_VERSION").exists():
        raise PreflightFailed(
            f"no EvalBook data directory at {data_dir.resolve()} (EVALBOOK_DATA_DIR): run "
            "`evalbook serve` there first, run this command where it ran, or set "
            "EVALBOOK_DATABASE_URL"
        )


def require_free_port(host: str, port: int) -> None:
    """Nothing listens on `host:port` yet."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PreflightFailed(
                    f"port {port} on {host} is in use (another `evalbook serve`?): stop it, or "
                    "pass --port with a free port"
                ) from None
            raise PreflightFailed(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def _where(url: str) -> str:
    from sqlalchemy.engine import make_url

    parsed = make_url(to_asyncpg_url(url))
    host = parsed.host or parsed.query.get("host") or "the local socket"
    return f"{host}:{parsed.port or 5432}/{parsed.database or ''}"


# What `_schema_version` answers when the schema is there but its revision may not be read (the
# service's role has no grant on alembic_version).
UNREADABLE = "unreadable"


async def _schema_version(url: str) -> str | None:
    """The database's schema revision, None without a schema, UNREADABLE when not ours to read."""
    connection = await asyncio.wait_for(asyncpg.connect(to_plain_url(to_asyncpg_url(url))), 10)
    try:
        exists = await connection.fetchval("SELECT to_regclass('alembic_version') IS NOT NULL")
        if not exists:
            return None
        try:
            version: str | None = await connection.fetchval(
                "SELECT version_num FROM alembic_version"
            )
        except asyncpg.InsufficientPrivilegeError:
            return UNREADABLE
        return version
    finally:
        await connection.close()


def head_revision() -> str:
    """The schema revision this version of the service needs."""
    from app.platform.db import alembic_config

    head = ScriptDirectory.from_config(alembic_config("postgresql://unused")).get_current_head()
    assert head is not None
    return head


def require_database(url: str, *, migrated: bool) -> None:
    """The database answers, and (with `migrated`) its schema is at this version's head."""
    try:
        version = asyncio.run(_schema_version(url))
    except (OSError, TimeoutError, asyncpg.PostgresConnectionError) as exc:
        reason = str(exc) or type(exc).__name__
        raise PreflightFailed(
            f"cannot reach the database at {_where(url)} ({reason}): is PostgreSQL running, "
            "and is EVALBOOK_DATABASE_URL right?"
        ) from None
    except asyncpg.PostgresError as exc:
        raise PreflightFailed(
            f"the database at {_where(url)} refused: {exc} (check EVALBOOK_DATABASE_URL)"
        ) from None
    if migrated and version not in (head_revision(), UNREADABLE):
        found = "no schema" if version is None else f"revision {version}"
        raise PreflightFailed(
            f"the database at {_where(url)} has {found}; this service needs revision "
            f"{head_revision()}: run `evalbook migrate` (as the tables' owner)"
        )
