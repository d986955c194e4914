"""How long `synaptomind stdio` takes from spawn to its `tools/list` answer (docs/BENCHMARKS.md).

Each run spawns `python -m app stdio` as an MCP client does (the SDK's stdio client), with the embedded
PostgreSQL in a data dir kept between runs (created by the first, warm-up run, which is not counted) and the
shipped model settings (or `--model`), then times the initialize handshake and `tools/list`. Reports the
median and range of the wall time and of the server process's CPU time (user + system of the process and its
waited-for children; the embedded PostgreSQL runs detached and is not in it).

    python -m bench.stdio_start --runs 7
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from app.embedding.profiles import OFFLINE_MINILM
from bench.common import machine

DATA_DIR = Path(__file__).parent / ".data" / "stdio-start"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def one_run(data_dir: Path, cache_dir: Path | None, env: dict[str, str]) -> tuple[float, float, float]:
    """(seconds to the initialize answer, seconds to the tools/list answer, CPU seconds of the server)."""
    variables = {**env, "SYNAPTO_DATA_DIR": str(data_dir)}
    if cache_dir is not None:
        variables["SYNAPTO_EMBEDDING__CACHE_DIR"] = str(cache_dir)
    params = StdioServerParameters(command=sys.executable, args=["-m", "app", "stdio"], env=variables)
    cpu_before = _children_cpu()
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        initialized = time.perf_counter() - started
        listing = await session.list_tools()
        listed = time.perf_counter() - started
        assert len(listing.tools) == 11, [tool.name for tool in listing.tools]
    return initialized, listed, _children_cpu() - cpu_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--cache-dir", type=Path, default=None, help="the model cache (default: the setting's)")
    parser.add_argument(
        "--model", default=None, help=f"embedding model (default: the shipped one; e.g. {OFFLINE_MINILM})"
    )
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if not key.startswith("SYNAPTO_")}
    env["SYNAPTO_LOG_LEVEL"] = "WARNING"
    if args.model:
        env["SYNAPTO_EMBEDDING__MODEL"] = args.model
    args.data_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(one_run(args.data_dir, args.cache_dir, env))  # warm-up: creates the cluster, migrates
    runs = [asyncio.run(one_run(args.data_dir, args.cache_dir, env)) for _ in range(args.runs)]
    print(f"machine: {machine()}, load average {os.getloadavg()[0]:.1f}, model {args.model or 'shipped default'}")
    for name, index in (("initialize", 0), ("tools/list", 1), ("server CPU", 2)):
        values = [run[index] for run in runs]
        print(
            f"{name:<11} median {statistics.median(values):.2f} s  "
            f"min {min(values):.2f} s  max {max(values):.2f} s  ({len(values)} runs)"
        )


if __name__ == "__main__":
    main()
