"""The search legs on a Citus cluster beside the single node, on the same rows.

    scripts/citus/cluster.sh start && synaptomind migrate && psql … -f scripts/citus/distribute.sql   (docs/DEPLOY.md)
    python -m bench.citus --thoughts 100000 --load            # copies bench.scale's store into the cluster, measures
    python -m bench.citus --thoughts 100000                   # measures again (the rows are there)

The service's write path does not run on Citus yet (docs/DEPLOY.md, "Citus"), so this measures what does: the
two retrieval legs as `SearchRepository` runs them (the vector leg, then the lexical leg: its statistics and its
ranking), as the local user (no visibility rule), for questions scoped to projects of every size class of
bench.scale's store and unscoped. The rows are copied as they are (users, projects, thoughts with their vectors
and content facts; the BM25 statistics are rebuilt by the cluster's triggers as the rows arrive), and the
projects counted and indexed on both sides as the background jobs would. Per class: p50 / p95 of each leg on
each side (the two sides alternate question by question) and how many questions got the same first ten of both
legs on both sides, and each side's vector leg's recall@10 against the exact ten (read on the single node).
CPU is not read: three PostgreSQL servers share the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from app.config import Bm25Settings
from app.db.engine import Database
from app.db.repositories.search import SearchFilter, SearchRepository
from app.services.recall.search import pool_size
from bench.common import machine, write_results
from bench.dataset import served_default_model
from bench.scale import LIMIT, RESULTS, Probe, Store, _where, load_base, make_probe, open_store, scoped_cases
from bench.search import exact, full_precision, recall_at, summary_ms

CLUSTER_URL = "postgresql+asyncpg://postgres@127.0.0.1:5701/synapto"  # scripts/citus/cluster.sh's coordinator
# Every column but the generated `tsv` (the cluster computes it); the other tables' rows are copied whole.
THOUGHT_COLUMNS = (
    "id, project_id, content, status, tags, is_protected, is_global, is_cluster, importance, surface_after, "
    "archived_at, created_by, created_at, updated_at, embedding, embedding_model, lexemes, content_md5"
)
COPIED = (("app_user", "*"), ("project", "*"), ("thought", THOUGHT_COLUMNS))


def _psql(url: str) -> list[str]:
    return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", url.replace("+asyncpg", "")]


def load(source: str, cluster: str) -> float:
    """The store's users, projects and thoughts into the cluster (emptied first): seconds taken."""
    started = time.perf_counter()
    tables = ", ".join(table for table, _ in COPIED)
    subprocess.run([*_psql(cluster), "-c", f"TRUNCATE {tables} CASCADE"], check=True, capture_output=True)
    for table, columns in COPIED:
        listed = "" if columns == "*" else f" ({columns})"
        reader = subprocess.Popen(
            [*_psql(source), "-c", f"COPY (SELECT {columns} FROM {table}) TO STDOUT"], stdout=subprocess.PIPE
        )
        subprocess.run([*_psql(cluster), "-c", f"COPY {table}{listed} FROM STDIN"], stdin=reader.stdout, check=True)
        if reader.wait() != 0:
            raise SystemExit(f"copying {table} out of the store failed")
    # The shards' statistics now, not when autovacuum comes by: measured at once, the plans of unanalysed shards
    # made a huge project's legs 3x slower (4 shards of 25 k rows, 100 k thoughts).
    subprocess.run([*_psql(cluster), "-c", f"ANALYZE {tables}"], check=True, capture_output=True)
    return time.perf_counter() - started


async def _legs(
    db: Database, vector: list[float], query: str, where: SearchFilter, model: str
) -> tuple[float, float, list[uuid.UUID]]:
    """Seconds of the vector leg and of the lexical leg, and the first ten ids of each (the vector leg's first)."""
    pool = pool_size(LIMIT)
    async with db.unit_of_work() as session:
        repository = SearchRepository(session)
        started = time.perf_counter()
        vector_rows = await repository.vector_leg(vector, model, where, pool)
        between = time.perf_counter()
        lexical = await repository.lexical_leg(query, where, pool, Bm25Settings())
        ended = time.perf_counter()
    first = [row.id for row in vector_rows[:LIMIT]] + [row.id for row in lexical.rows[:LIMIT]]
    return between - started, ended - between, first


async def measure(store: Store, cluster: str, model: str, queries: int) -> dict[str, Any]:
    base = load_base(model)
    single = await make_probe(store, base, model)
    on_cluster = Store(store.n, cluster, store.embedded, store.marker_file, store.marker)
    clustered: Probe = await make_probe(on_cluster, base, model)
    out: dict[str, Any] = {}
    try:
        for name, cases in scoped_cases(single, queries, seed=5, without_replacement=True).items():
            seconds: dict[str, list[float]] = {key: [] for key in ("single", "citus")}
            legs: dict[str, list[float]] = {f"{side} {leg}": [] for side in seconds for leg in ("vector", "lexical")}
            recall: dict[str, list[float]] = {side: [] for side in seconds}
            same = 0
            for rank, query in cases:
                vector = await single.runtime.embed_query(query)
                assert vector is not None
                async with single.db.unit_of_work() as session:
                    truth = await exact(session, vector, _where(single, rank), pool_size(LIMIT), model=model)
                answers = []
                for side, probe in (("single", single), ("citus", clustered)):
                    vector_s, lexical_s, first = await _legs(probe.db, vector, query, _where(probe, rank), model)
                    legs[f"{side} vector"].append(vector_s)
                    legs[f"{side} lexical"].append(lexical_s)
                    seconds[side].append(vector_s + lexical_s)
                    answers.append(first)
                    async with single.db.unit_of_work() as session:
                        found = await full_precision(session, vector, [(id_, 0.0) for id_ in first[:LIMIT]])
                    recall[side].append(recall_at(found, truth, LIMIT))
                same += answers[0] == answers[1]
            out[name] = {
                "questions": len(cases),
                "same_first_ten": same,
                "vector_recall_at_10": {side: round(statistics.mean(values), 4) for side, values in recall.items()},
                "both_legs_ms": {side: summary_ms(values) for side, values in seconds.items()},
                "legs_ms": {key: summary_ms(values) for key, values in legs.items()},
                "scans": sorted({_where(clustered, rank).vector_scan.value for rank, _ in cases}),
            }
            both = out[name]["both_legs_ms"]
            print(
                f"  {name:<8}: single {both['single']['p50']:.1f} / {both['single']['p95']:.1f} ms, "
                f"citus {both['citus']['p50']:.1f} / {both['citus']['p95']:.1f} ms, "
                f"same first ten {same}/{len(cases)}, vector R@10 {out[name]['vector_recall_at_10']}",
                flush=True,
            )
    finally:
        await single.db.dispose()
        await clustered.db.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thoughts", type=int, default=10_000, choices=(10_000, 100_000, 1_000_000))
    parser.add_argument("--cluster-url", default=CLUSTER_URL)
    parser.add_argument("--queries", type=int, default=50, help="per size class and unscoped")
    parser.add_argument("--load", action="store_true", help="copy the store into the cluster first")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    model = served_default_model()
    store = open_store(args.thoughts)  # built by `python -m bench.scale --thoughts N --sections none`
    try:
        results: dict[str, Any] = {"machine": machine(), "thoughts": args.thoughts, "model": model}
        if args.load:
            results["load_s"] = round(load(store.url, args.cluster_url), 1)
            print(f"loaded in {results['load_s']} s", flush=True)
        results["classes"] = asyncio.run(measure(store, args.cluster_url, model, args.queries))
        target = args.json or RESULTS / f"citus-{args.thoughts}.json"
        write_results(results, target)
    finally:
        store.embedded.stop()


if __name__ == "__main__":
    main()
