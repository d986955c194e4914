"""The embedded database stops with its owner: on SIGTERM to `serve`, and after a holder was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from app.db.embedded import EmbeddedPostgres
from bench.common import free_port, wait_ready


def test_sigterm_stops_serve_and_its_embedded_postgres(tmp_path: Path) -> None:
    """docker stop / systemd send SIGTERM: uvicorn shuts down and re-raises it; the embedded server must not be
    left running without its owner."""
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("SYNAPTO_")}
    env |= {"SYNAPTO_DATA_DIR": str(tmp_path / "data"), "SYNAPTO_JOBS__ENABLED": "false"}
    command = [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    postmaster = tmp_path / "data" / "pgdata" / "postmaster.pid"
    try:
        wait_ready(f"http://127.0.0.1:{port}", server, 120, model=False)
        assert postmaster.exists()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 128 + signal.SIGTERM
        assert not postmaster.exists(), "the embedded PostgreSQL was left running"
    finally:
        if server.poll() is None:
            server.kill()
        if postmaster.exists():  # do not leak a server when the test fails: fast shutdown of the postmaster
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGINT)


def test_a_holder_killed_without_leaving_does_not_keep_the_embedded_postgres_running(tmp_path: Path) -> None:
    """A process holding the embedded server dies by SIGKILL; the next process to use and leave it stops it."""
    data_dir = tmp_path / "data"
    holder = (
        "import os, signal, sys; from pathlib import Path; from app.db.embedded import EmbeddedPostgres; "
        "EmbeddedPostgres(Path(sys.argv[1])).start(); os.kill(os.getpid(), signal.SIGKILL)"
    )
    killed = subprocess.run([sys.executable, "-c", holder, str(data_dir)], timeout=120, check=False)
    assert killed.returncode == -signal.SIGKILL
    postmaster = data_dir / "pgdata" / "postmaster.pid"
    try:
        assert postmaster.exists()
        embedded = EmbeddedPostgres(data_dir)
        embedded.start()
        embedded.stop()
        assert not postmaster.exists(), "the embedded PostgreSQL outlived its last holder"
    finally:
        if postmaster.exists():
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGINT)
