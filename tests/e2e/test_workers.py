"""`serve --workers 2`: real worker processes on one port and one database. What each process kept to itself
before holds across them: the per-token rate limit (one bucket row per token), the background jobs (one run per
advisory lock), the embedding backfill; and a stop ends every worker, then the embedded PostgreSQL."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from app.db.engine import Database
from app.services.auth.tokens import AuthService
from bench.common import free_port, wait_ready
from tests.conftest import MODEL_CACHE
from tests.support.helpers import ToolCaller, execute, rows

WORKERS = 2


@contextmanager
def serving(tmp_path: Path, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """`serve --workers 2` on a free port with these settings, until both workers serve; stopped by the test."""
    port = free_port()
    base = {key: value for key, value in os.environ.items() if not key.startswith("SYNAPTO_")}
    base |= {"SYNAPTO_LOG_FORMAT": "text", "SYNAPTO_EMBEDDING__CACHE_DIR": str(MODEL_CACHE)} | env
    command = [sys.executable, "-m", "app", "serve", "--port", str(port), "--workers", str(WORKERS)]
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as log:
        server = subprocess.Popen(command, env=base, stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_ready(f"http://127.0.0.1:{port}", server, 300, model=False)
        deadline = time.monotonic() + 300
        while stderr.read_text().count("Application startup complete.") < WORKERS:
            assert time.monotonic() < deadline, stderr.read_text()[-2000:]
            time.sleep(0.2)
        yield server, port, stderr
    finally:
        if server.poll() is None:
            server.kill()  # its workers follow (app.main: the parent's death signal)
            server.wait(30)


def worker_pids(server: subprocess.Popen[bytes]) -> set[int]:
    children = psutil.Process(server.pid).children()
    return {child.pid for child in children if "spawn_main" in " ".join(child.cmdline())}


def owner(connection: http.client.HTTPConnection, workers: set[int], port: int, wait: float = 20.0) -> int:
    """The worker that accepted this (kept-alive) connection. The handshake completes in the kernel before a
    worker's accept(): on a busy box that takes a while, so look again until `wait` seconds have passed."""
    local = connection.sock.getsockname()[1]
    deadline = time.monotonic() + wait
    while True:
        for pid in workers:
            for held in psutil.Process(pid).net_connections("tcp"):
                if held.status == psutil.CONN_ESTABLISHED and held.laddr.port == port and held.raddr.port == local:
                    return pid
        if time.monotonic() > deadline:
            raise AssertionError(f"no worker holds the connection from port {local}")
        time.sleep(0.05)


def call(connection: http.client.HTTPConnection, token: str, name: str, arguments: dict[str, object]) -> str | None:
    """One stateless MCP tools/call; None when it succeeded, else the error's message."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    connection.request("POST", "/mcp", json.dumps(body), headers)
    response = connection.getresponse()
    assert response.status == 200
    result = json.loads(response.read())["result"]
    return str(result["content"][0]["text"]) if result.get("isError") else None


def connections_on_every_worker(port: int, workers: set[int]) -> dict[int, http.client.HTTPConnection]:
    """A kept-alive connection accepted by each worker (the kernel picks the worker of each new connection)."""
    held: dict[int, http.client.HTTPConnection] = {}
    spare: list[http.client.HTTPConnection] = []
    for _ in range(40):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.connect()
        pid = owner(connection, workers, port)
        if pid in held:
            spare.append(connection)
        else:
            held[pid] = connection
        if len(held) == len(workers):
            break
    for connection in spare:
        connection.close()
    assert len(held) == len(workers), f"connections reached {len(held)} of {len(workers)} workers"
    return held


async def test_two_workers_share_the_rate_limit_and_run_each_job_and_backfill_once(
    clean_database: Database, database_url: str, writer: ToolCaller, tmp_path: Path
) -> None:
    """The rate limit (5 calls/minute) holds for a token whichever worker takes each call: 5 calls on one worker,
    then the other worker refuses the 6th (with a bucket per process it had 5 of its own). The importance decay,
    due once a day, decays a thought once although both workers tick every 0.2 s; a thought stored without a
    vector gets one. SIGTERM stops both workers and the parent with 0."""
    stored = await writer.ok("memory_store", {"action": "create", "content": "Workers share one database"})
    pending = await writer.ok("memory_store", {"action": "create", "content": "A vector the backfill writes"})
    await execute(writer, "UPDATE thought SET importance = 0.8 WHERE id = :id", id=stored.item["id"])
    await execute(
        writer, "UPDATE thought SET embedding = NULL, embedding_model = NULL WHERE id = :id", id=pending.item["id"]
    )
    await execute(writer, "DELETE FROM thought_hit")
    await execute(writer, "DELETE FROM audit_event WHERE tool = 'jobs'")
    token = await writer_token(writer)
    env = {
        "SYNAPTO_DATABASE_URL": database_url,
        "SYNAPTO_DATA_DIR": str(tmp_path / "data"),
        "SYNAPTO_RATE_LIMIT__PER_MINUTE": "5",
        "SYNAPTO_JOBS__TICK_SECONDS": "0.2",
        "SYNAPTO_POOL_SIZE": "2",
    }
    with serving(tmp_path, env) as (server, port, stderr):
        workers = worker_pids(server)
        assert len(workers) == WORKERS
        first, second = connections_on_every_worker(port, workers).values()
        answers = [call(first, token, "memory_manage", {"action": "list"}) for _ in range(5)]
        assert answers == [None] * 5
        refused = call(second, token, "memory_manage", {"action": "list"})
        assert refused is not None and refused.startswith("Rate limit exceeded for this token (5 calls/minute)")
        deadline = time.monotonic() + 60
        while await rows(writer, "SELECT 1 FROM thought WHERE embedding IS NULL"):
            assert time.monotonic() < deadline, "the backfill did not embed the pending thought"
            await asyncio.sleep(0.3)
        await asyncio.sleep(2.0)  # ten ticks of each worker
        decays = await rows(
            writer, "SELECT count(*) FROM audit_event WHERE tool = 'jobs' AND action = 'importance_decay'"
        )
        importance = await rows(writer, "SELECT importance FROM thought WHERE id = :id", id=stored.item["id"])
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
        assert not any(
            psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in workers
        )
    assert decays == [(1,)]
    assert importance[0][0] == pytest.approx(0.8 * 0.95)
    lines = stderr.read_text().splitlines()
    assert "app: stopped (SIGTERM)" in lines[-1], lines[-5:]
    assert not [line for line in lines if " ERROR " in line or "Traceback" in line]


async def writer_token(writer: ToolCaller) -> str:
    async with writer.context.db.unit_of_work() as session:
        token, _ = await AuthService(session).create_token(writer.principal.name, None, "workers")
    return token


def test_ctrl_c_stops_both_workers_then_the_embedded_database(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group: the parent stops the workers, then the embedded PostgreSQL; the
    first admin token is printed once (by the parent), not once per worker."""
    # Outside pytest's base temp: a concurrent pytest session resets it to 0700, and the embedded server's own
    # user then cannot reach its data dir to stop it.
    holder = tempfile.TemporaryDirectory(prefix="synapto-workers-")
    data_dir = Path(holder.name) / "data"
    env = {"SYNAPTO_DATA_DIR": str(data_dir), "SYNAPTO_JOBS__ENABLED": "false"}
    postmaster = data_dir / "pgdata" / "postmaster.pid"
    with serving(tmp_path, env) as (server, _port, stderr):
        assert postmaster.exists()
        workers = worker_pids(server)
        for pid in (server.pid, *workers):  # as a terminal's Ctrl-C: every process of the group
            os.kill(pid, signal.SIGINT)
        assert server.wait(timeout=60) == 0
        assert not postmaster.exists(), "the embedded PostgreSQL was left running"
    holder.cleanup()
    lines = stderr.read_text().splitlines()
    assert "app: stopped (SIGINT)" in lines[-1], lines[-5:]
    assert sum(line.startswith("First run: created user 'admin'") for line in lines) == 1
    assert not [line for line in lines if " ERROR " in line or "Traceback" in line]
