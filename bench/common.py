"""Helpers the benchmarks and the end-to-end tests share: the machine's description and CPU counters, serve
subprocesses, the app under uvicorn in the caller's event loop, and an MCP client session."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import socket
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from app.config import Settings


def shipped_settings() -> Settings:
    """Every setting at its shipped default, whatever SYNAPTO_* variables or a .env say: a benchmark measures the
    service as shipped. Built from the defaults alone (no environment source), which are valid by construction."""
    return Settings.model_construct()


def write_results(results: dict[str, Any], target: Path) -> None:
    """A benchmark's results as indented JSON at `target` (its folder made), and where they went."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"results: {target}")


def machine() -> str:
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        memory = float("nan")
    return (
        f"{os.cpu_count()} cores ({cpu_model()}), {memory:.0f} GiB RAM, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}"
    )


def cpu_model() -> str:
    """The CPU's name with its family and model numbers: machines of one kind differ between sessions (a figure
    taken on one CPU moved by up to 2x on another), so every result names the CPU it was taken on."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in fields:
        name += f", family {fields['cpu family']} model {fields.get('model', '?')}"
    return name


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine, or None off Linux."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_ready(base: str, server: subprocess.Popen[bytes], timeout: float = 180, *, model: bool = True) -> None:
    """Until `serve` at `base` answers /health; with `model`, also its embedder ready (the configured model,
    not a fallback)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                embedder = json.load(response)["checks"]["embedder"]
                if not model or embedder["state"] == "ready":
                    return
                if embedder["state"] in ("fallback", "unavailable"):
                    raise SystemExit(f"server embedder {embedder}")
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit("the server did not become ready")


class QuietServer(uvicorn.Server):
    """uvicorn that leaves the caller's signal handlers alone (a test runner's, a benchmark's)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def loopback_listener() -> tuple[socket.socket, int]:
    """A bound loopback socket for uvicorn and its port (bound before the app is built, so no race)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    return listener, int(listener.getsockname()[1])


@asynccontextmanager
async def uvicorn_serving(app: Any, listener: socket.socket) -> AsyncIterator[None]:
    """The ASGI app under uvicorn on `listener`, in this event loop, until the block ends (then the socket closes)."""
    server = QuietServer(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        async with asyncio.timeout(30):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.02)
        yield
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(task, 15)
        except TimeoutError:
            server.force_exit = True
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        listener.close()


@asynccontextmanager
async def mcp_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """The official MCP client over streamable HTTP with a bearer token, initialised."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
