"""Helpers every benchmark shares: the machine's description and CPU counters, serve subprocesses."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def machine() -> str:
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        memory = float("nan")
    return (
        f"{os.cpu_count()} cores, {memory:.0f} GiB RAM, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}"
    )


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


def wait_ready(base: str, server: subprocess.Popen[bytes], timeout: float = 180) -> None:
    """Until `serve` at `base` answers /health with its embedder ready (the offline model, not a fallback)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                embedder = json.load(response)["checks"]["embedder"]
                if embedder["state"] == "ready":
                    return
                if embedder["state"] in ("fallback", "unavailable"):
                    raise SystemExit(f"server embedder {embedder}")
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit("the server did not become ready")
