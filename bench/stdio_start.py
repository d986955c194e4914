"""How long `synaptomind stdio` takes from spawn to its `tools/list` answer (docs/BENCHMARKS.md).

Each run spawns `python -m app stdio` as an MCP client does (the SDK's stdio client), with the embedded
PostgreSQL in a data dir kept between runs (created by the first, warm-up run, which is not counted) and the
shipped model settings (or `--model`), then times the initialize handshake and `tools/list`. Reports the
median and range of the wall time and of the server's CPU time until the `tools/list` answer (user + system,
read from /proc: the whole process, i.e. with the embedder loading in its thread, and its main thread; the
embedded PostgreSQL is another process and not in it). Linux only.

    python -m bench.stdio_start --runs 7
    python -m bench.stdio_start --runs 7 --checkout ../main --data-dir bench/.data/stdio-start-main  # before
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from app.embedding.profiles import OFFLINE_MINILM
from bench.common import machine

DATA_DIR = Path(__file__).parent / ".data" / "stdio-start"


def _cpu_seconds(stat: Path) -> float:
    """utime + stime of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat file."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server_cpu() -> tuple[float, float]:
    """(CPU seconds of the whole server process so far, of its main thread so far): the child of this process
    running `app stdio`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(status.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"stdio" in cmdline:
            return _cpu_seconds(entry / "stat"), _cpu_seconds(entry / "task" / entry.name / "stat")
    raise RuntimeError("the stdio server process was not found")


async def one_run(
    data_dir: Path, cache_dir: Path | None, env: dict[str, str], checkout: Path | None = None
) -> tuple[float, float, float, float]:
    """(seconds to the initialize answer, seconds to the tools/list answer, CPU seconds of the server process
    and of its main thread until that answer)."""
    variables = {**env, "SYNAPTO_DATA_DIR": str(data_dir)}
    if cache_dir is not None:
        variables["SYNAPTO_EMBEDDING__CACHE_DIR"] = str(cache_dir)
    params = StdioServerParameters(command=sys.executable, args=["-m", "app", "stdio"], env=variables, cwd=checkout)
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        initialized = time.perf_counter() - started
        listing = await session.list_tools()
        listed = time.perf_counter() - started
        process_cpu, main_thread_cpu = _server_cpu()
        assert len(listing.tools) == 11, [tool.name for tool in listing.tools]
    return initialized, listed, process_cpu, main_thread_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--cache-dir", type=Path, default=None, help="the model cache (default: the setting's)")
    parser.add_argument(
        "--model", default=None, help=f"embedding model (default: the shipped one; e.g. {OFFLINE_MINILM})"
    )
    parser.add_argument(
        "--checkout", type=Path, default=None, help="run the server from this checkout (e.g. main, for a before/after)"
    )
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if not key.startswith("SYNAPTO_")}
    env["SYNAPTO_LOG_LEVEL"] = "WARNING"
    if args.model:
        env["SYNAPTO_EMBEDDING__MODEL"] = args.model
    args.data_dir = args.data_dir.resolve()  # absolute: the server's cwd may be another checkout
    args.data_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(one_run(args.data_dir, args.cache_dir, env, args.checkout))  # warm-up: creates the cluster, migrates
    runs = [asyncio.run(one_run(args.data_dir, args.cache_dir, env, args.checkout)) for _ in range(args.runs)]
    print(f"machine: {machine()}, load average {os.getloadavg()[0]:.1f}, model {args.model or 'shipped default'}")
    for name, index in (("initialize", 0), ("tools/list", 1), ("CPU", 2), ("main thr.", 3)):
        values = [run[index] for run in runs]
        print(
            f"{name:<11} median {statistics.median(values):.2f} s  "
            f"min {min(values):.2f} s  max {max(values):.2f} s  ({len(values)} runs)"
        )


if __name__ == "__main__":
    main()
