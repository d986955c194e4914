"""What a read costs on a read replica against the primary (docs/DEPLOY.md, "Read replicas").

    python -m bench.replicas [--n 10000] [--rounds 200]

The bench's dataset of `n` thoughts (the served model's vectors; bench.dataset loads it if needed), a hot standby of
it made by `pg_basebackup -R` on loopback (tests/support/standby.py), and the same calls through `dispatch` (the
MCP server's path, no HTTP) on two contexts that share the primary's engine: one without replicas, one with the
standby. Rounds alternate which goes first. Also timed alone: the read-your-writes check's two round trips (the
primary's flushed WAL position, the standby's replayed one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import text

from app.db.engine import Database, build_engine
from app.db.replicas import _PRIMARY_FLUSHED, _REPLAYED, CONNECT_TIMEOUT_SECONDS, ReplicaSet, _fetch
from app.services.context import AppContext
from bench.dataset import (
    PROJECTS,
    admin_principal,
    generate_queries,
    offline_runtime,
    open_dataset,
    served_default_model,
    settings_for,
    tool_caller,
)
from bench.search import summary_ms
from tests.support.standby import standby_of


async def _timed(work: Awaitable[Any]) -> float:
    started = time.perf_counter()
    await work
    return time.perf_counter() - started


async def measure(url: str, standby_url: str, model: str, rounds: int) -> dict[str, Any]:
    runtime = await offline_runtime(model=model)
    primary = Database(build_engine(url, pool_size=4))
    replicas = ReplicaSet.of([build_engine(standby_url, pool_size=4, connect_timeout=CONNECT_TIMEOUT_SECONDS)])
    replicated = Database(primary.engine, replicas)
    settings = settings_for(model)
    principal = await admin_principal(primary, "bench-replicas")
    calls = {
        "primary": tool_caller(AppContext(primary, runtime, settings), principal),
        "replica": tool_caller(AppContext(replicated, runtime, settings), principal),
    }
    async with primary.unit_of_work() as session:
        found = await session.execute(text("SELECT id FROM thought ORDER BY id LIMIT :n"), {"n": rounds})
        ids = [str(row.id) for row in found]
    queries = generate_queries(rounds)
    kinds: dict[str, Callable[[int], dict[str, Any]]] = {
        "get": lambda i: {"action": "get", "thought_id": ids[i % len(ids)]},
        "search": lambda i: {"action": "search", "query": queries[i].text, "cwd": PROJECTS[queries[i].project].cwd},
    }
    timings: dict[str, dict[str, list[float]]] = {
        kind: {"primary": [], "replica": [], "on_replica": [], "fell_back": []} for kind in kinds
    }
    for warm in range(20):  # pools filled, plans cached, pages in both servers' buffers
        for where in calls:
            for arguments in kinds.values():
                await calls[where]("memory_recall", arguments(warm))
    replicas.routed.clear()
    for index in range(rounds):
        order = ["primary", "replica"] if index % 2 == 0 else ["replica", "primary"]
        for kind, arguments in kinds.items():
            for where in order:
                before = replicas.routed["replica"]
                seconds = await _timed(calls[where]("memory_recall", arguments(index)))
                timings[kind][where].append(seconds)
                if where == "replica":  # which side served it: the replica, or the primary after all
                    served = "on_replica" if replicas.routed["replica"] > before else "fell_back"
                    timings[kind][served].append(seconds)
    checks: dict[str, list[float]] = {name: [] for name in ("primary_flushed_lsn", "replica_replayed_lsn")}
    checks["replayed_after_commit"] = []
    async with primary.engine.connect() as on_primary, replicas.replicas[0].engine.connect() as on_replica:
        for _ in range(rounds):
            checks["primary_flushed_lsn"].append(await _timed(_fetch(on_primary, _PRIMARY_FLUSHED)))
            checks["replica_replayed_lsn"].append(await _timed(_fetch(on_replica, _REPLAYED)))
        # How long after a commit returns the standby has replayed it: what the wait bound is measured against.
        for _ in range(rounds):
            await on_primary.execute(text("UPDATE thought SET importance = importance WHERE id = :id"), {"id": ids[0]})
            await on_primary.commit()
            target = int(await _fetch(on_primary, _PRIMARY_FLUSHED))
            started = time.perf_counter()
            while int(await _fetch(on_replica, _REPLAYED)) < target:  # noqa: ASYNC110 (polling another server)
                await asyncio.sleep(0.0002)
            checks["replayed_after_commit"].append(time.perf_counter() - started)
    routed = dict(replicas.routed)
    await replicas.dispose()
    await primary.dispose()
    return {
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, shared with other sessions",
        "model": model,
        "rounds": rounds,
        "routed": routed,
        "calls_ms": {
            kind: {where: summary_ms(values) for where, values in by.items() if values} for kind, by in timings.items()
        },
        "check_ms": {name: summary_ms(values) for name, values in checks.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument(
        "--standby-fsync-off",
        action="store_true",
        help="the standby does not fsync the WAL it receives before replaying it (what a fast disk would cost)",
    )
    args = parser.parse_args()
    model = served_default_model()
    with open_dataset(args.n, model=model) as dataset:
        standby = standby_of(dataset.url)
        if standby is None:
            raise SystemExit("bench.replicas needs the embedded dataset server (unset SYNAPTO_DATABASE_URL)")
        if args.standby_fsync_off:
            standby.server_options = "-c fsync=off"
        standby.start()
        try:
            result = asyncio.run(measure(dataset.url, standby.url(), model, args.rounds))
        finally:
            standby.remove()
    print(json.dumps({"n": args.n, "standby_fsync": not args.standby_fsync_off, **result}, indent=2))


if __name__ == "__main__":
    main()
