"""Benchmark: what per-project membership adds to a hybrid search (docs/BENCHMARKS.md, "Membership").

    python -m bench.membership --thoughts 100000 --queries 300

On the `bench.dataset` store (`bench/.data/<N>`), the smallest project (3 %) is closed (its everyone row
removed) and three callers run the same `memory_recall action=search` calls through `dispatch` — the whole tool,
as the MCP server runs it — interleaved query by query in a rotating order, so machine noise hits them alike:

- `local`: the local user (stdio, auth mode none), who sees every project: no membership work at all — the
  path of a search before membership existed;
- `member`: a token's user who is a member of every project (the closed one by a row of their own): the
  membership query when the unit of work begins, then the statements unchanged;
- `outsider`: a token's user who is not a member of the closed project: the membership query, and the
  visibility criteria in every statement.

Modes: `hybrid` (each query with its project's cwd; queries of the closed project left out, since the outsider
would search everything else instead) and `hybrid_all` (no cwd). Reported: p50/p95 per caller, and the paired
per-query difference to `local` (median with a bootstrap 95 % interval, and its p95). Results go to stdout and
bench/results/membership-<N>.json. The closed project is reopened at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import statistics
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.config import EmbeddingSettings
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.embedding.profiles import OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.services.admin.membership import MemberService
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from app.services.jobs.background import refresh_thought_estimates
from app.services.jobs.project_indexes import reconcile_project_indexes
from bench.common import machine, shipped_settings, write_results
from bench.dataset import PROJECTS, generate_queries, model_cache_dir, offline_runtime, open_dataset, tool_caller
from bench.search import pct, summary_ms

RESULTS = Path(__file__).resolve().parent / "results"
CLOSED = len(PROJECTS) - 1  # the 3 % project
CALLERS = ("local", "member", "outsider")


def calls_for(mode: str, n: int) -> list[dict[str, Any]]:
    queries = [query for query in generate_queries(n + n // 10 + 20) if query.project != CLOSED][:n]
    calls = []
    for query in queries:
        arguments: dict[str, Any] = {"action": "search", "query": query.text}
        if mode == "hybrid":
            arguments["cwd"] = PROJECTS[query.project].cwd
        calls.append(arguments)
    return calls


def paired(differences: Sequence[float], rng: random.Random) -> dict[str, float]:
    """Median of the paired differences (ms) with a bootstrap 95 % interval, and their p95."""
    ms = [value * 1000 for value in differences]
    medians = sorted(statistics.median(rng.choices(ms, k=len(ms))) for _ in range(2000))
    return {
        "median": round(statistics.median(ms), 3),
        "ci95_low": round(medians[50], 3),
        "ci95_high": round(medians[1949], 3),
        "p95": round(pct(ms, 95), 3),
    }


async def run(n_thoughts: int, url: str, queries: int) -> dict[str, Any]:
    inner = await offline_runtime()
    assert inner.embedder is not None
    runtime = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, model_dir=None, cache_dir=model_cache_dir()))
    runtime.use(inner.embedder)
    db = Database(build_engine(url, pool_size=4))
    await refresh_thought_estimates(db)  # the vector leg plans as in a deployment whose jobs run
    await reconcile_project_indexes(db)
    context = AppContext(db, runtime, shipped_settings())
    suffix = uuid.uuid4().hex[:6]
    async with db.unit_of_work() as session:
        auth = AuthService(session)
        local = dataclasses.replace(await auth.ensure_user(f"bench-local-{suffix}", Role.admin), sees_everything=True)
        member = await auth.ensure_user(f"bench-member-{suffix}", Role.reader)
        outsider = await auth.ensure_user(f"bench-outsider-{suffix}", Role.reader)
        closed = (await MemberService(session).project(PROJECTS[CLOSED].name)).id
        await MemberService(session).remove(str(closed), None)
        await MemberService(session).add(str(closed), member.name, Role.reader)
    callers = {
        "local": tool_caller(context, local),
        "member": tool_caller(context, member),
        "outsider": tool_caller(context, outsider),
    }
    rng = random.Random(11)
    results: dict[str, Any] = {"thoughts": n_thoughts, "queries": queries, "machine": machine()}
    try:
        for mode in ("hybrid", "hybrid_all"):
            calls = calls_for(mode, queries)
            for arguments in calls[:20]:  # warm every path
                for name in CALLERS:
                    await callers[name]("memory_recall", arguments)
            times: dict[str, list[float]] = {name: [] for name in CALLERS}
            for index, arguments in enumerate(calls):
                for offset in range(len(CALLERS)):
                    name = CALLERS[(index + offset) % len(CALLERS)]
                    started = time.perf_counter()
                    await callers[name]("memory_recall", arguments)
                    times[name].append(time.perf_counter() - started)
            row: dict[str, Any] = {name: summary_ms(times[name]) for name in CALLERS}
            for name in ("member", "outsider"):
                row[f"{name}_minus_local_ms"] = paired(
                    [a - b for a, b in zip(times[name], times["local"], strict=True)], rng
                )
            results[mode] = row
            added = {name: row[f"{name}_minus_local_ms"] for name in ("member", "outsider")}
            spread = ", ".join(
                f"{name} {d['median']:+.3f} ms [{d['ci95_low']:+.3f}, {d['ci95_high']:+.3f}]"
                for name, d in added.items()
            )
            print(
                f"{mode:<10} p50 local {row['local']['p50']:.2f}  member {row['member']['p50']:.2f}  "
                f"outsider {row['outsider']['p50']:.2f} ms; paired median added: {spread}",
                flush=True,
            )
    finally:
        async with db.unit_of_work() as session:
            await MemberService(session).add(str(closed), None, Role.admin)  # reopened, as the dataset was
        await db.dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thoughts", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300, help="calls per mode and caller")
    parser.add_argument("--json", type=Path, help="default: bench/results/membership-<N>.json")
    args = parser.parse_args()
    with open_dataset(args.thoughts) as dataset:
        results = asyncio.run(run(args.thoughts, dataset.url, args.queries))
    target = args.json or RESULTS / f"membership-{args.thoughts}.json"
    write_results(results, target)


if __name__ == "__main__":
    main()
