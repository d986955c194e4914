"""Benchmark: the organisation actions at scale — memory_status frontier and health, auto_cluster preview.

    python -m bench.organisation --thoughts 10000       # what `make bench-organisation` runs
    python -m bench.organisation --thoughts 100000 --runs 5

Dataset: `bench.dataset` (the same databases as bench.search, in bench/.data/<N>). About 5 % of the
thoughts are frontier items (tags todo/directive/pending) and ~30 % of those have a depends_on edge to
another one of their project; 2 % of the thoughts have a related edge. Creation times are spread
over 18 months by the loader (SQL), so nearly every thought is old enough for auto_cluster.

Each action is called through `app.mcp.dispatch.dispatch` in this process (the tool handler with
validation, scope resolution, the service and the shaping, without HTTP; an admin principal):

- `memory_status frontier` with the largest project's cwd, and without cwd (every project);
- `memory_status health` with include_details false and true;
- `memory_crystallize auto_cluster` preview (no confirm: nothing is written but the preview token).

One warm-up call (its time is reported as first_call_s), then `--runs` timed calls (fewer when an
action exceeds `--budget` seconds); median and max. Every SQL statement is timed with SQLAlchemy
cursor events, so the report shows where an action spends its time; a statement slower than
`--explain-over` seconds is profiled with EXPLAIN (ANALYZE, BUFFERS) and its plan printed. A call
that fails (e.g. the app's 60 s statement timeout) is reported with the plan of the statement it
was running. `--auto-cluster-variants` also times rewrites of the auto_cluster pairs query.
Results go to bench/results/organisation-<N>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import Connection

from app.db.engine import Database, build_engine
from app.embedding.profiles import OFFLINE_MINILM, profile_for
from app.services.context import AppContext
from app.services.status.health import CHECKS, DETAIL_LIMIT
from bench.common import machine, shipped_settings, write_results
from bench.dataset import (
    PROJECTS,
    Dataset,
    admin_principal,
    describe,
    offline_runtime,
    open_dataset,
    tool_caller,
    untimed,
)
from bench.search import CpuMeter, versions

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Statement:
    sql: str
    params: Any
    seconds: float


@dataclass
class Recorder:
    """Every statement of the armed window with its parameters and seconds."""

    armed: bool = False
    statements: list[Statement] = field(default_factory=list)
    running: Statement | None = None  # the statement in flight (the culprit when a call times out)

    def attach(self, db: Database) -> None:
        started: dict[int, float] = {}

        def before(conn: Connection, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
            started[id(cursor)] = time.perf_counter()
            self.running = Statement(statement, parameters, 0.0)

        def after(conn: Connection, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
            begin = started.pop(id(cursor), None)
            if begin is not None and self.armed:
                self.statements.append(Statement(statement, parameters, time.perf_counter() - begin))

        event.listen(db.engine.sync_engine, "before_cursor_execute", before)
        event.listen(db.engine.sync_engine, "after_cursor_execute", after)


def short(sql: str, width: int = 110) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@dataclass(frozen=True)
class Case:
    name: str
    tool: str
    arguments: dict[str, Any]


def cases() -> list[Case]:
    largest = PROJECTS[0].cwd
    return [
        Case("frontier (cwd: largest project)", "memory_status", {"action": "frontier", "cwd": largest}),
        Case("frontier (no cwd: all projects)", "memory_status", {"action": "frontier"}),
        Case("health include_details=false", "memory_status", {"action": "health", "include_details": False}),
        Case("health include_details=true", "memory_status", {"action": "health", "include_details": True}),
        Case("auto_cluster preview", "memory_crystallize", {"action": "auto_cluster"}),
    ]


def answer_summary(case: Case, answer: dict[str, Any]) -> dict[str, Any]:
    meta = answer.get("meta", {})
    if case.arguments["action"] == "health":
        item = answer.get("item") or {}
        return {"health_score": item.get("health_score"), "findings": item.get("summary", {}).get("findings")}
    return {"counts": meta.get("counts"), "items": len(answer.get("items") or [])}


async def explain(url: str, statement: Statement) -> list[str]:
    db = untimed(url)
    try:
        async with db.engine.connect() as connection:
            sql = "EXPLAIN (ANALYZE, BUFFERS) " + statement.sql
            result = await connection.exec_driver_sql(sql, statement.params)
            lines = [str(row[0]) for row in result]
            await connection.rollback()
    finally:
        await db.dispose()
    return [trim(line) for line in lines]


def trim(line: str) -> str:
    """A plan line without its long literals (id arrays, vectors)."""
    line = re.sub(r"'\{([^}]{200,})\}'", lambda m: f"'{{…{m.group(1).count(',') + 1} values}}'", line)
    return re.sub(r"'\[[^\]]{200,}\]'", "'[…vector]'", line)


async def health_checks(db: Database) -> list[dict[str, Any]]:
    """Each health check's query alone: as HealthService runs it (every finding row fetched, up to 10 000),
    and as a count in SQL plus the first DETAIL_LIMIT rows (the cheaper shape suggested in the report)."""
    rows = []
    async with db.unit_of_work() as session:
        for check in CHECKS:
            started = time.perf_counter()
            found = (await session.execute(text(f"SELECT * FROM ({check.sql}) AS finding LIMIT 10000"))).all()
            fetched = time.perf_counter() - started
            started = time.perf_counter()
            count = (await session.execute(text(f"SELECT count(*) FROM ({check.sql}) AS finding"))).scalar_one()
            await session.execute(text(f"SELECT * FROM ({check.sql}) AS finding LIMIT {DETAIL_LIMIT}"))
            counted = time.perf_counter() - started
            rows.append(
                {
                    "check": check.name,
                    "ms": round(fetched * 1000, 1),
                    "rows": len(found),
                    "count_in_sql_ms": round(counted * 1000, 1),
                    "count": int(count),
                }
            )
    return rows


ELIGIBLE = (
    "SELECT t.id FROM thought t WHERE NOT t.is_cluster AND t.status IN ('active', 'draft') "
    "AND t.created_at < now() - make_interval(days => :days) AND t.embedding_model = :model "
    "AND NOT EXISTS (SELECT 1 FROM edge e WHERE e.target_id = t.id AND e.type = 'cluster')"
)

# The pairs statement of ClusterService.auto_groups (app/services/crystallize/clusters.py), and two rewrites.
HALF_A, HALF_B, HALF_B2 = ("a.embedding::halfvec(384)", "b.embedding::halfvec(384)", "b2.embedding::halfvec(384)")
AUTO_CLUSTER_PAIRS = {
    "shipped": (
        "SELECT a.id AS a, n.id AS b FROM thought a CROSS JOIN LATERAL ("
        " SELECT b.id FROM thought b WHERE b.id = ANY(:ids) AND b.id <> a.id AND b.embedding_model = :model"
        f" ORDER BY {HALF_B} <=> {HALF_A} LIMIT 10) n"
        f" JOIN thought b2 ON b2.id = n.id WHERE a.id = ANY(:ids) AND ({HALF_A} <=> {HALF_B2}) < :max_distance"
    ),
    "distance in the lateral": (
        "SELECT a.id AS a, n.id AS b FROM thought a CROSS JOIN LATERAL ("
        f" SELECT b.id, {HALF_B} <=> {HALF_A} AS d FROM thought b"
        " WHERE b.id = ANY(:ids) AND b.id <> a.id AND b.embedding_model = :model"
        f" ORDER BY {HALF_B} <=> {HALF_A} LIMIT 10) n WHERE a.id = ANY(:ids) AND n.d < :max_distance"
    ),
    "eligibility outside the lateral": (
        "SELECT a.id AS a, n.id AS b FROM thought a CROSS JOIN LATERAL ("
        f" SELECT b.id, {HALF_B} <=> {HALF_A} AS d FROM thought b"
        f" WHERE b.id <> a.id AND b.embedding_model = :model ORDER BY {HALF_B} <=> {HALF_A} LIMIT 10) n"
        " WHERE a.id = ANY(:ids) AND n.d < :max_distance AND n.id = ANY(:ids)"
    ),
}


async def auto_cluster_variants(db: Database, max_distance: float, efs: list[int]) -> list[dict[str, Any]]:
    """The auto_cluster pairs query as shipped and rewritten, at hnsw.ef_search values: seconds and pairs."""
    async with db.unit_of_work() as session:
        params = {"days": shipped_settings().auto_cluster.min_age_days, "model": OFFLINE_MINILM}
        ids = [row.id for row in await session.execute(text(ELIGIBLE), params)]
    rows = []
    reference: set[frozenset[Any]] | None = None
    for name, sql in AUTO_CLUSTER_PAIRS.items():
        for ef in [0, *efs]:
            async with db.unit_of_work() as session:
                if ef:
                    await session.execute(text(f"SET LOCAL hnsw.ef_search = {int(ef)}"))
                started = time.perf_counter()
                params = {"ids": ids, "model": OFFLINE_MINILM, "max_distance": max_distance}
                found = (await session.execute(text(sql), params)).all()
                seconds = time.perf_counter() - started
            pairs = {frozenset((row.a, row.b)) for row in found}
            if reference is None:
                reference = pairs
            row = {
                "query": name,
                "ef_search": ef or "default (40)",
                "seconds": round(seconds, 2),
                "pairs": len(pairs),
                "pairs_missing_vs_shipped": len(reference - pairs),
            }
            rows.append(row)
            print(
                f"  auto_cluster pairs, {name:<32} ef {row['ef_search']!s:<13}: {seconds:7.2f} s, "
                f"{len(pairs)} pairs ({row['pairs_missing_vs_shipped']} of the shipped ones missing)",
                flush=True,
            )
    return rows


async def generic_plan_check(url: str, max_distance: float) -> list[dict[str, Any]]:
    """The shipped pairs query 6 times on one connection (the 6th may run on PostgreSQL's generic plan),
    then once more with plan_cache_mode = force_custom_plan; the app's 60 s statement timeout applies."""
    db = Database(build_engine(url, pool_size=1))
    rows: list[dict[str, Any]] = []
    try:
        async with db.unit_of_work() as session:
            params = {"days": shipped_settings().auto_cluster.min_age_days, "model": OFFLINE_MINILM}
            ids = [row.id for row in await session.execute(text(ELIGIBLE), params)]
        for execution in range(1, 8):
            forced = execution == 7
            started = time.perf_counter()
            outcome = "ok"
            try:
                async with db.unit_of_work() as session:
                    if forced:
                        await session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
                    arguments = {"ids": ids, "model": OFFLINE_MINILM, "max_distance": max_distance}
                    await session.execute(text(AUTO_CLUSTER_PAIRS["shipped"]), arguments)
            except Exception as error:  # the statement timeout
                outcome = f"failed: {type(error).__name__}"
            seconds = time.perf_counter() - started
            rows.append(
                {"execution": execution, "force_custom_plan": forced, "seconds": round(seconds, 2), "outcome": outcome}
            )
            print(
                f"  pairs query, execution {execution} on one connection{' (force_custom_plan)' if forced else ''}: "
                f"{seconds:6.2f} s {outcome}",
                flush=True,
            )
    finally:
        await db.dispose()
    return rows


async def main_async(dataset: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    url = dataset.url
    db = Database(build_engine(dataset.url, pool_size=4))
    recorder = Recorder()
    recorder.attach(db)
    meter = CpuMeter(dataset.pgdata)
    runtime = await offline_runtime()
    call = tool_caller(AppContext(db, runtime, shipped_settings()), await admin_principal(db, "bench-organisation"))
    info = {
        "thoughts": args.thoughts,
        "machine": machine(),
        "database": await versions(db),
        "dataset": await describe(dataset.url),
        "transport": "app.mcp.dispatch.dispatch in-process (no HTTP)",
        "load_start": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(info, indent=1), flush=True)
    results: dict[str, Any] = {"info": info, "actions": []}
    try:
        for case in [c for c in cases() if not args.only or args.only in c.name]:
            times: list[float] = []
            statements: dict[str, list[float]] = {}
            slowest: Statement | None = None
            failure: str | None = None
            answer: dict[str, Any] = {}
            before = meter.snapshot()
            first: float | None = None
            while len(times) < args.runs and (not times or sum(times) < args.budget):
                recorder.statements.clear()
                recorder.armed = True
                started = time.perf_counter()
                try:
                    answer = await call(case.tool, case.arguments)
                except SystemExit as error:  # the tool answered an error (e.g. the statement timeout)
                    recorder.armed = False
                    failure = f"{error} after {time.perf_counter() - started:.1f} s"
                    if recorder.running is not None:
                        slowest = Statement(
                            recorder.running.sql, recorder.running.params, time.perf_counter() - started
                        )
                    print(f"{case.name:<34} FAILED: {failure}", flush=True)
                    break
                elapsed = time.perf_counter() - started
                recorder.armed = False
                if first is None:
                    first = elapsed  # the warm-up call: reported, not in the median
                    continue
                times.append(elapsed)
                for statement in recorder.statements:
                    statements.setdefault(short(statement.sql), []).append(statement.seconds)
                    if slowest is None or statement.seconds > slowest.seconds:
                        slowest = statement
            if not times:
                row_failed: dict[str, Any] = {"action": case.name, "runs": 0, "error": failure}
                if slowest is not None:
                    row_failed["explain"] = {"sql": " ".join(slowest.sql.split()), "plan": await explain(url, slowest)}
                    for line in row_failed["explain"]["plan"]:
                        print(f"      {line}", flush=True)
                results["actions"].append(row_failed)
                continue
            cpu = meter.since(before)
            top = sorted(statements.items(), key=lambda kv: -sum(kv[1]))[:4]
            row: dict[str, Any] = {
                "action": case.name,
                "runs": len(times),
                "median_s": round(statistics.median(times), 4),
                "max_s": round(max(times), 4),
                "min_s": round(min(times), 4),
                "first_call_s": None if first is None else round(first, 4),
                "error": failure,
                "answer": answer_summary(case, answer),
                "top_statements": [
                    {"sql": sql, "median_ms": round(statistics.median(ts) * 1000, 1), "per_call": len(ts) // len(times)}
                    for sql, ts in top
                ],
                **cpu,
            }
            print(
                f"{case.name:<34} runs {len(times)}  median {row['median_s'] * 1000:9.1f} ms  "
                f"max {row['max_s'] * 1000:9.1f} ms   {row['answer']}  (load {cpu['load1']}, "
                f"others {cpu.get('others_cpu_s')} CPU-s)",
                flush=True,
            )
            for entry in row["top_statements"]:
                print(f"    {entry['median_ms']:9.1f} ms ×{entry['per_call']}  {entry['sql']}", flush=True)
            if slowest is not None and slowest.seconds > args.explain_over:
                plan = await explain(url, slowest)
                row["explain"] = {"sql": " ".join(slowest.sql.split()), "plan": plan}
                print("    EXPLAIN ANALYZE of the slowest statement:", flush=True)
                for line in plan:
                    print(f"      {line}", flush=True)
            results["actions"].append(row)
        if args.auto_cluster_variants:
            distance = (
                shipped_settings().auto_cluster.min_similarity or profile_for(OFFLINE_MINILM).auto_cluster_distance
            )
            slow_db = untimed(url)
            try:
                results["auto_cluster_variants"] = await auto_cluster_variants(slow_db, distance, args.auto_cluster_ef)
            finally:
                await slow_db.dispose()
        if args.generic_plan_check:
            distance = (
                shipped_settings().auto_cluster.min_similarity or profile_for(OFFLINE_MINILM).auto_cluster_distance
            )
            results["generic_plan_check"] = await generic_plan_check(url, distance)
        results["health_checks"] = await health_checks(db)
        print(
            "health checks, each alone (ms, rows): "
            + ", ".join(f"{c['check']} {c['ms']} ({c['rows']})" for c in results["health_checks"])
        )
    finally:
        await db.dispose()
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average at start {info['load_start']}, at end {info['load_end']}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thoughts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=float, default=120, help="stop repeating an action after this many seconds")
    parser.add_argument("--explain-over", type=float, default=1.0, help="EXPLAIN ANALYZE statements slower than this")
    parser.add_argument(
        "--auto-cluster-variants", action="store_true", help="also time rewrites of the auto_cluster pairs query"
    )
    parser.add_argument("--auto-cluster-ef", type=lambda v: [int(x) for x in v.split(",")], default=[20])
    parser.add_argument(
        "--generic-plan-check", action="store_true", help="run the auto_cluster pairs query 7 times on one connection"
    )
    parser.add_argument("--only", help="run only the actions whose name contains this text")
    parser.add_argument("--json", type=Path, help="default: bench/results/organisation-<N>.json")
    args = parser.parse_args()
    with open_dataset(args.thoughts) as dataset:
        results = asyncio.run(main_async(dataset, args))
    target = args.json or RESULTS / f"organisation-{args.thoughts}.json"
    write_results(results, target)


if __name__ == "__main__":
    main()
