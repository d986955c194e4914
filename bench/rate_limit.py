"""Benchmark: what the shared rate limit costs per tool call (one UPSERT on `rate_bucket`, app.services.auth.ratelimit).

    python -m bench.rate_limit --calls 2000

An embedded PostgreSQL in a temporary directory, migrated; `--calls` takes from one token's bucket in a row (the
limit high enough to grant every one), then as many from `--calls` distinct tokens. Prints the wall time and the CPU
of this process (Python, asyncpg) and of PostgreSQL per call.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import psutil

from app.db import migrations
from app.db.embedded import EmbeddedPostgres, tuned_server_settings
from app.db.engine import Database, build_engine
from app.services.auth.ratelimit import SharedRateLimiter


def postgres_cpu(pgdata: Path) -> float:
    root = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
    return sum(sum(p.cpu_times()[:2]) for p in (root, *root.children(recursive=True)))


async def measure(url: str, pgdata: Path, calls: int) -> None:
    db = Database(build_engine(url, 2))
    limiter = SharedRateLimiter(db, per_minute=10**9)
    try:
        await limiter.retry_after("warm")
        for label, keys in (("one token", ["one"] * calls), ("distinct tokens", [f"t{i}" for i in range(calls)])):
            wall, mine, theirs = time.perf_counter(), time.process_time(), postgres_cpu(pgdata)
            for key in keys:
                assert await limiter.retry_after(key) is None
            wall, mine, theirs = (
                time.perf_counter() - wall,
                time.process_time() - mine,
                postgres_cpu(pgdata) - theirs,
            )
            per = 1000 / calls
            print(
                f"{label:16} {calls} calls: wall {wall * per:.3f} ms/call, CPU python {mine * per:.3f} ms/call, "
                f"postgres {theirs * per:.3f} ms/call"
            )
    finally:
        await db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="synapto-ratelimit-") as tmp:
        embedded = EmbeddedPostgres(Path(tmp), server_settings=tuned_server_settings())
        url = embedded.start()
        try:
            migrations.upgrade(url)
            asyncio.run(measure(url, Path(tmp) / "pgdata", args.calls))
        finally:
            embedded.stop()


if __name__ == "__main__":
    main()
