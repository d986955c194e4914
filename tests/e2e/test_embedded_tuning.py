"""The embedded server runs with the service's settings: applied on first start, kept, never forced on others."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.db import embedded as embedded_module
from app.db.embedded import EmbeddedPostgres, machine_ram_bytes, shared_buffers_mb, tuned_server_settings

SMALL = {"shared_buffers": "2048", "shared_preload_libraries": "pg_prewarm"}  # 16 MB: keeps the test light


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])


def _show(embedded: EmbeddedPostgres, name: str) -> str:
    return embedded._query(f"SHOW {name}").strip()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "data"
    postmaster = tmp_path / "data" / "pgdata" / "postmaster.pid"
    if postmaster.exists():  # do not leak a server when a test fails
        os.kill(int(postmaster.read_text().split()[0]), signal.SIGINT)


def test_the_default_buffers_are_a_quarter_of_memory_between_128_mb_and_8_gb() -> None:
    assert shared_buffers_mb(64 * 2**30) == 8192
    assert shared_buffers_mb(24 * 2**30) == 6144
    assert shared_buffers_mb(2 * 2**30) == 512
    assert shared_buffers_mb(256 * 2**20) == 128
    assert tuned_server_settings(1024) == {"shared_buffers": "131072", "shared_preload_libraries": "pg_prewarm"}


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"v2": "2147483648\n"}, 2 * 2**30),  # a container of 2 GB: its quarter, not the host's
        ({"v2": "max\n", "v1": "2147483648\n"}, None),  # v2 says no limit: v1's file is not read
        ({"v1": "2147483648\n"}, 2 * 2**30),
        ({"v1": str(2**63 - 4096)}, None),  # v1's "no limit" is a number above the machine's memory
        ({}, None),  # no cgroup files: the machine's memory
    ],
)
def test_the_memory_counted_is_the_containers_limit_when_lower(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limits: dict[str, str], expected: int | None
) -> None:
    files = {"v2": tmp_path / "memory.max", "v1": tmp_path / "memory.limit_in_bytes"}
    for version, content in limits.items():
        files[version].write_text(content)
    monkeypatch.setattr(embedded_module, "CGROUP_MEMORY_LIMITS", (files["v2"], files["v1"]))
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert machine_ram_bytes() == (ram if expected is None else min(ram, expected))


def test_a_fresh_server_restarts_once_with_the_settings_and_still_stops_with_its_owner(data_dir: Path) -> None:
    embedded = EmbeddedPostgres(data_dir, server_settings=SMALL)
    embedded.start()
    assert _show(embedded, "shared_buffers") == "16MB"
    assert _show(embedded, "shared_preload_libraries") == "pg_prewarm"
    first = _postmaster_pid(data_dir)
    embedded.stop()
    assert not (data_dir / "pgdata" / "postmaster.pid").exists(), "the restarted server outlived its owner"

    again = EmbeddedPostgres(data_dir, server_settings=SMALL)
    again.start()
    started = _postmaster_pid(data_dir)
    assert not again._apply_settings(), "settings already in place were written again"
    assert _postmaster_pid(data_dir) == started != first
    again.stop()


def test_a_server_another_process_holds_is_not_restarted(data_dir: Path) -> None:
    holder = (
        "import sys, time; from pathlib import Path; from app.db.embedded import EmbeddedPostgres; "
        "e = EmbeddedPostgres(Path(sys.argv[1])); e.start(); print('ready', flush=True); sys.stdin.read(); e.stop()"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", holder, str(data_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "ready"
        running = _postmaster_pid(data_dir)
        embedded = EmbeddedPostgres(data_dir, server_settings=SMALL)
        embedded.start()
        assert _postmaster_pid(data_dir) == running
        assert _show(embedded, "shared_buffers") == "128MB"  # pending until the next start
        embedded.stop()
        assert (data_dir / "pgdata" / "postmaster.pid").exists(), "stopped under the other holder"
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(timeout=60)
    deadline = time.monotonic() + 10
    while (data_dir / "pgdata" / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()
