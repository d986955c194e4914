"""`synaptomind serve` on the embedded database stops that database when it is told to stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from bench.common import free_port


def _wait_for_health(port: int, server: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, f"serve exited with {server.returncode}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError("serve did not answer /health")


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
        _wait_for_health(port, server)
        assert postmaster.exists()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 128 + signal.SIGTERM
        assert not postmaster.exists(), "the embedded PostgreSQL was left running"
    finally:
        if server.poll() is None:
            server.kill()
        if postmaster.exists():  # do not leak a server when the test fails: fast shutdown of the postmaster
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGINT)
