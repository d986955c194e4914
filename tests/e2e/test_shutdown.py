"""The embedded database stops with its owner: on SIGTERM or SIGINT to `serve`, and after a holder was killed;
and what the operator's terminal shows on the way."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from app.db.embedded import EmbeddedPostgres
from bench.common import free_port, wait_ready
from tests.conftest import MODEL_CACHE

# A line of the text log format (app.observability.TEXT_FORMAT); a line starting with a space continues one.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_served_start_and_stop_as_an_operator_sees_them(tmp_path: Path, stop: signal.Signals) -> None:
    """docker stop / systemd send SIGTERM, Ctrl-C (`make run`) SIGINT: uvicorn shuts down and re-raises it; the
    embedded server stops with its owner and the process ends with 0 and one line (`make` reported Error 143).
    The log on the way is one format (uvicorn's and the SDK's lines too), no ERROR for the expected fallback of
    a model missing from the cache (fastembed's), the first admin token alone on its line, and a client that
    disconnects mid-request one line, no traceback (issue 22)."""
    port = free_port()
    data_dir = tmp_path / "data"
    env = {key: value for key, value in os.environ.items() if not key.startswith("SYNAPTO_")}
    env |= {
        "SYNAPTO_DATA_DIR": str(data_dir),
        "SYNAPTO_JOBS__ENABLED": "false",
        "SYNAPTO_LOG_FORMAT": "text",
        # The shipped model is not in this cache: the service falls back to the offline model, as expected.
        "SYNAPTO_EMBEDDING__CACHE_DIR": str(MODEL_CACHE),
    }
    command = [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)]
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as log:
        server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)
    postmaster = data_dir / "pgdata" / "postmaster.pid"
    try:
        wait_ready(f"http://127.0.0.1:{port}", server, 120, model=False)
        _wait_for_embedder(port)
        assert postmaster.exists()
        token = (data_dir / "admin.token").read_text().strip()
        _disconnect_mid_request(port, token)
        server.send_signal(stop)
        assert server.wait(timeout=60) == 0
        assert not postmaster.exists(), "the embedded PostgreSQL was left running"
    finally:
        if server.poll() is None:
            server.kill()
        if postmaster.exists():  # do not leak a server when the test fails: fast shutdown of the postmaster
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGINT)
    lines = stderr.read_text().splitlines()
    assert f"app: stopped ({stop.name})" in lines[-1], lines[-5:]
    assert token in lines and lines[lines.index(token) - 1] == "" and lines[lines.index(token) + 1] == ""
    notice = lines.index(token) - 2
    assert lines[notice].startswith("First run: created user 'admin'"), lines[notice]
    other = [line for index, line in enumerate(lines) if line and index not in (notice, notice + 2)]
    assert all(LOG_LINE.match(line) or line.startswith(" ") for line in other), other
    assert not [line for line in other if " ERROR " in line or "Traceback" in line], other
    assert any("uvicorn.error: Uvicorn running on" in line for line in other)
    assert any("client disconnected before its request was read" in line for line in other), other


def _wait_for_embedder(port: int) -> None:
    """Until the embedder's loading ended (ready or fallback): its log lines are then written."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        # 30 s: while a worker's embedder loads (imports, ONNX sessions) its event loop can stall for seconds on a
        # loaded machine, and `serve` runs a worker per core, each loading its own at once.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as response:
            if json.load(response)["checks"]["embedder"]["state"] != "loading":
                return
        time.sleep(0.3)
    raise AssertionError("the embedder did not finish loading")


def _disconnect_mid_request(port: int, token: str) -> None:
    """A POST /mcp that announces a body it never sends, then closes: the server reads until the disconnect."""
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        'Content-Length: 1000\r\n\r\n{"jsonrpc"'
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(head.encode())
        time.sleep(0.5)  # the request reached the app and waits for the rest of its body
    time.sleep(1.0)  # the server noticed and logged


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
