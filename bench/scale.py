"""Benchmark: many tenants — up to 1,000,000 thoughts over 1,000 projects of long-tailed sizes (issue 26).

    python -m bench.scale --thoughts 10000      # one stage (build or reuse its store, then measure it)
    python -m bench.scale --thoughts 100000
    python -m bench.scale --thoughts 1000000
    python -m bench.scale --thoughts 10000 --sections tenancy   # partial indexes against planning and writes
    python -m bench.scale --thoughts 1000000 --sections http --http-passes 2 --shared-buffers-mb 6144

**Projects** (`project_sizes`): 1,000 projects `/scale/t0000` … `/scale/t0999`. At 1 M: six of 100, 90, 80, 70,
60 and 50 k thoughts (450 k), then a Zipf tail of 550 k over the other 994 (size ∝ 1 / rank): 15 of 5-16 k, 88 of
1-5 k and 891 under 1 k (109-999). A smaller stage scales every project by N / 1 M (at least one thought), so a
class keeps its projects: size classes (`CLASSES`) are by rank — huge (the six), large (ranks 7-21), medium
(22-109), small (110-1000).

**Vectors**: the served model's (multilingual-e5-small, q4) for a real sample — the 100 k thoughts of
`bench.dataset`'s e5 set (`bench/.data/100000-<model folder>`, read once into `bench/.data/scale/base-100000.npz`)
— and derived ones for the rest. Thought `position` (0 … N-1, projects in rank order) takes base thought
`position % 100 000` (bases ordered by their dataset project, so a project's thoughts share a vocabulary) with its
content, tags and status; copy 0 of a base keeps its real vector, copy c ≥ 1 gets the real vector plus Gaussian
noise of norm ~`NOISE` (0.25, cosine ~0.97 to the base), renormalised, seeded by the position. So up to 100 k
every vector is real; at 1 M the 100 k real vectors are project t0000's and the 900 k of the others are derived.
The store writes them through `memory_store bulk_create` (`app.mcp.registry.dispatch`, in process, calls of 1000)
with `DerivedEmbedder`, an `Embedder` that returns the prepared vector of each content (queries: the real model).

**Load** (resumable: per project, what is stored is skipped): all but the last `TAIL` (10 k) thoughts with the
shared HNSW index dropped (a million single graph inserts would take hours here), then the index built again from
its own definition (timed), the project counts refreshed and the per-project indexes built by the job
(`reconcile_project_indexes`, timed), then the last 10 k (spread over the projects by size) through the same bulk
path with every index in place: the bulk throughput at that size. At 10 k the whole set is that tail.

**Measure** (`--sections`): `http` p50/p95 of `memory_recall search` hybrid and vector over HTTP (the real server
subprocess, 1 client), scoped to projects of each size class and unscoped, each class on a new server (its
query-vector cache empty) with questions drawn without replacement (`--http-passes`: every question again, the
pages the first pass read now in shared_buffers as far as they fit; `--shared-buffers-mb`: the store's
shared_buffers, the store restarted with it); `recall` the shipped vector leg's
recall@10 against exact search per class; `plan` EXPLAIN ANALYZE's Planning Time of the vector leg per class,
the locks and the relation cache one search takes; `sizes` disk and index sizes, shared_buffers; `tenancy`
(separate, meant for the 10 k store): 0 … 1000 partial HNSW indexes against planning time, locks, backend memory
and insert cost; `cost` PostgreSQL's CPU per inserted row with every index and with each dropped in turn (the
shared graph, the project's own, the GINs, the content btree), per size class. `--synthetic-base`: the same plan
with hashed bag-of-words vectors instead of the e5 set (stores bench/.data/scale-synthetic-<N>), for the write
sections when the e5 set is not there. Results: bench/results/scale-<N>.json (gitignored); the store stays in
bench/.data/scale-<N>.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import random
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from app.config import EmbeddingSettings
from app.db import migrations, project_indexes
from app.db.embedded import EmbeddedPostgres, tuned_server_settings
from app.db.engine import Database, build_engine
from app.db.models import Role, ThoughtStatus
from app.db.records import Principal
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.search import SearchFilter, SearchRepository, _vector_leg_statement, hnsw_ef_search
from app.db.repositories.thoughts import VectorScan
from app.embedding.embedder import Embedder, Vector
from app.embedding.profiles import ModelProfile
from app.embedding.runtime import QUERY_CACHE_ENTRIES, EmbeddingRuntime, QueryVectorCache
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from app.services.jobs.background import refresh_thought_estimates
from app.services.jobs.project_indexes import reconcile_project_indexes
from app.services.recall.search import pool_size
from bench.common import machine, write_results
from bench.dataset import (
    DATA_ROOT,
    PROJECTS,
    admin_principal,
    dataset_dir,
    generate,
    generate_queries,
    model_cache_dir,
    offline_runtime,
    open_dataset,
    served_default_model,
    settings_for,
    tool_caller,
    untimed,
)
from bench.search import CpuMeter, _literal, exact, full_precision, http_server, recall_at, run_http, summary_ms

BASE_N = 100_000
FULL = 1_000_000
PROJECT_COUNT = 1000
HUGE = (100_000, 90_000, 80_000, 70_000, 60_000, 50_000)
TAIL = 10_000
NOISE = 0.25
SEED = 20261201
BATCH = 1000
HNSW_INDEX = "ix_thought_embedding_hnsw"
SCALE_ROOT = DATA_ROOT / "scale"
RESULTS = Path(__file__).resolve().parent / "results"
LIMIT = 10
# By rank (0-based, half-open): the classes of the 1 M plan, kept at every stage.
CLASSES = {"huge": (0, 6), "large": (6, 21), "medium": (21, 109), "small": (109, PROJECT_COUNT)}


def _full_sizes() -> list[int]:
    tail_ranks = range(len(HUGE) + 1, PROJECT_COUNT + 1)
    weights = [1 / rank for rank in tail_ranks]
    return list(HUGE) + _apportion(FULL - sum(HUGE), weights)


def _apportion(total: int, weights: Sequence[float], minimum: int = 0) -> list[int]:
    """`total` split by `weights` (largest remainders), each part at least `minimum`."""
    spare = total - minimum * len(weights)
    scale = spare / sum(weights)
    exact_parts = [w * scale for w in weights]
    parts = [minimum + int(p) for p in exact_parts]
    order = sorted(range(len(weights)), key=lambda i: exact_parts[i] - int(exact_parts[i]), reverse=True)
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def project_sizes(n: int) -> list[int]:
    """Thoughts per project (rank order) for a stage of `n` thoughts: the 1 M plan scaled, at least 1 each."""
    full = _full_sizes()
    return full if n == FULL else _apportion(n, [float(s) for s in full], minimum=1)


def size_class(rank: int) -> str:
    return next(name for name, (low, high) in CLASSES.items() if low <= rank < high)


def project_path(rank: int) -> str:
    return f"/scale/t{rank:04d}"


# ---------------------------------------------------------------- the real sample and the derived vectors


@dataclass
class Base:
    vectors: np.ndarray  # (BASE_N, 384) float32, unit length
    vocab: np.ndarray  # (BASE_N,) the bench.dataset project of each base thought
    rows: list[dict[str, Any]]  # content, tags, status


async def _read_base(url: str, model: str) -> Base:
    db = untimed(url)
    try:
        async with db.unit_of_work() as session:
            result = await session.execute(
                text(
                    "SELECT p.name, t.content, t.tags, t.status::text AS status, t.embedding FROM thought t "
                    "JOIN project p ON p.id = t.project_id WHERE p.local_path LIKE '/bench/%' AND NOT t.is_cluster "
                    "AND t.embedding_model = :m ORDER BY p.name, md5(t.content)"
                ),
                {"m": model},
            )
            records = result.all()
    finally:
        await db.dispose()
    names = [p.name for p in PROJECTS]
    vectors = np.stack([np.asarray(r.embedding.to_numpy(), dtype=np.float32) for r in records])
    vocab = np.array([names.index(r.name) for r in records], dtype=np.int8)
    rows = [{"content": r.content, "tags": list(r.tags or []), "status": r.status} for r in records]
    return Base(vectors, vocab, rows)


def load_base(model: str) -> Base:
    """The 100 k real e5 vectors, from the cache or (once) from the bench.dataset store."""
    cache = SCALE_ROOT / f"base-{BASE_N}.npz"
    rows_file = SCALE_ROOT / f"base-{BASE_N}.json"
    if cache.exists() and rows_file.exists():
        arrays = np.load(cache)
        return Base(arrays["vectors"], arrays["vocab"], json.loads(rows_file.read_text()))
    print(f"base: reading the {BASE_N} real vectors of {dataset_dir(BASE_N, model)}", flush=True)
    with open_dataset(BASE_N, model=model) as dataset:
        base = asyncio.run(_read_base(dataset.url, model))
    if len(base.rows) != BASE_N:
        raise SystemExit(f"base: {len(base.rows)} thoughts found, {BASE_N} wanted")
    SCALE_ROOT.mkdir(parents=True, exist_ok=True)
    np.savez(cache, vectors=base.vectors, vocab=base.vocab)
    rows_file.write_text(json.dumps(base.rows))
    return base


def synthetic_base() -> Base:
    """bench.dataset's 100 k contents, tags and status in the real base's order, each with a hashed bag-of-words
    random projection (normalised) for a vector: for measuring writes without the e5 set (a store of its own,
    `--synthetic-base`); its vectors are not the model's, so its recall and latency say nothing."""
    cache = SCALE_ROOT / f"synthetic-base-{BASE_N}.npz"
    rows_file = SCALE_ROOT / f"synthetic-base-{BASE_N}.json"
    if cache.exists() and rows_file.exists():
        arrays = np.load(cache)
        return Base(arrays["vectors"], arrays["vocab"], json.loads(rows_file.read_text()))
    thoughts = generate(BASE_N)
    thoughts.sort(key=lambda t: (PROJECTS[t.project].name, hashlib.md5(t.content.encode()).hexdigest()))
    table = np.random.default_rng(7).standard_normal((1 << 16, 384)).astype(np.float32)
    vectors = np.zeros((len(thoughts), table.shape[1]), dtype=np.float32)
    for i, thought in enumerate(thoughts):
        words = re.findall(r"\w+", thought.content.lower())
        slots = [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little") & 0xFFFF for w in words]
        vectors[i] = table[slots].sum(axis=0)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = [{"content": t.content, "tags": list(t.tags), "status": t.status} for t in thoughts]
    base = Base(vectors, np.array([t.project for t in thoughts], dtype=np.int8), rows)
    SCALE_ROOT.mkdir(parents=True, exist_ok=True)
    np.savez(cache, vectors=base.vectors, vocab=base.vocab)
    rows_file.write_text(json.dumps(base.rows))
    return base


def vector_at(base: Base, position: int) -> np.ndarray:
    """Real for the first copy of a base, else the base plus seeded noise of norm ~NOISE, renormalised."""
    origin = base.vectors[position % BASE_N]
    if position < BASE_N:
        return origin
    noise = np.random.Generator(np.random.PCG64([SEED, position])).standard_normal(origin.shape[0])
    derived = origin + noise.astype(np.float32) * (NOISE / math.sqrt(origin.shape[0]))
    return derived / np.linalg.norm(derived)


def payload_at(base: Base, position: int) -> dict[str, Any]:
    row = base.rows[position % BASE_N]
    payload: dict[str, Any] = {"content": row["content"]}
    if row["tags"]:
        payload["tags"] = row["tags"]
    if row["status"] == "draft":
        payload["status"] = "draft"
    return payload


class DerivedEmbedder:
    """Passages: the vector prepared for each content of the call (`expect`); queries: the real model."""

    def __init__(self, real: Embedder) -> None:
        self.real = real
        self.profile: ModelProfile = real.profile
        self.prepared: dict[str, Vector] = {}

    def expect(self, contents: Sequence[str], vectors: Sequence[Vector]) -> None:
        self.prepared = dict(zip(contents, vectors, strict=True))

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        return [self.prepared[t] for t in texts]

    async def embed_query(self, text_: str) -> Vector:
        return await self.real.embed_query(text_)


# ---------------------------------------------------------------- the store


@dataclass
class Store:
    n: int
    url: str
    embedded: EmbeddedPostgres
    marker_file: Path
    marker: dict[str, Any] = field(default_factory=dict)

    def save(self) -> None:
        self.marker_file.write_text(json.dumps(self.marker, indent=2) + "\n")


def tail_sizes(sizes: list[int], n: int) -> list[int]:
    """The last thoughts of each project that are stored with every index in place (TAIL in all)."""
    if n <= TAIL:
        return list(sizes)
    tail = _apportion(TAIL, [float(s) for s in sizes])
    return [min(t, s) for t, s in zip(tail, sizes, strict=True)]


async def _stored_per_project(db: Database) -> dict[str, int]:
    async with db.unit_of_work() as session:
        result = await session.execute(
            text(
                "SELECT p.local_path, count(t.id) AS n FROM project p LEFT JOIN thought t ON t.project_id = p.id "
                "WHERE p.local_path LIKE '/scale/%' GROUP BY p.local_path"
            )
        )
        return {row.local_path: int(row.n) for row in result}


async def _store_rows(
    context: AppContext,
    principal: Principal,
    embedder: DerivedEmbedder,
    base: Base,
    sizes: list[int],
    upto: list[int],
    label: str,
) -> dict[str, Any]:
    """Each project filled up to `upto[rank]` thoughts (what is stored already is skipped), in calls of BATCH."""
    call = tool_caller(context, principal)
    stored = await _stored_per_project(context.db)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    todo = sum(max(0, u - stored.get(project_path(r), 0)) for r, u in enumerate(upto))
    done, seconds = 0, 0.0
    for rank, want in enumerate(upto):
        have = stored.get(project_path(rank), 0)
        for start in range(have, want, BATCH):
            positions = range(offsets[rank] + start, offsets[rank] + min(want, start + BATCH))
            payloads = [payload_at(base, p) for p in positions]
            embedder.expect([p["content"] for p in payloads], [vector_at(base, p).tolist() for p in positions])
            arguments = {"action": "bulk_create", "cwd": project_path(rank), "thoughts": payloads}
            started = time.perf_counter()
            result = await call("memory_store", arguments)
            seconds += time.perf_counter() - started
            counts = result["meta"]["counts"]
            if counts.get("created") != len(payloads) or counts.get("failed") != 0:
                raise SystemExit(f"bulk_create into {project_path(rank)} stored {counts} of {len(payloads)}")
            done += len(payloads)
            if done % 20_000 < len(payloads) or done == todo:
                print(f"  {label}: {done:>7}/{todo}  {seconds:6.0f}s in calls ({done / seconds:.0f}/s)", flush=True)
    return {"rows": done, "call_seconds": round(seconds, 1), "rows_per_s": round(done / seconds, 1) if done else None}


async def _ensure_projects(context: AppContext, principal: Principal) -> None:
    call = tool_caller(context, principal)
    stored = await _stored_per_project(context.db)
    for rank in range(PROJECT_COUNT):
        if project_path(rank) not in stored:
            await call("memory_manage", {"action": "create", "name": f"t{rank:04d}", "local_path": project_path(rank)})


async def _index_definition(db: Database) -> str | None:
    async with db.unit_of_work() as session:
        found = await session.execute(text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"), {"n": HNSW_INDEX})
        return found.scalar_one_or_none()


async def _autocommit(url: str, *statements: str) -> float:
    db = untimed(url)
    try:
        async with db.engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            started = time.perf_counter()
            for statement in statements:
                await connection.execute(text(statement))
            return time.perf_counter() - started
    finally:
        await db.dispose()


async def build(store: Store, base: Base, model: str) -> None:
    marker = store.marker
    if marker.get("stage") == "ready":
        print(f"store: reusing {store.n} thoughts in {store.marker_file.parent}", flush=True)
        return
    runtime = await offline_runtime(model=model)
    assert runtime.embedder is not None
    embedder = DerivedEmbedder(runtime.embedder)
    derived = EmbeddingRuntime(EmbeddingSettings(model=model, cache_dir=model_cache_dir()))
    derived.use(embedder)
    db = Database(build_engine(store.url, pool_size=2))
    context = AppContext(db, derived, settings_for(model))
    try:
        principal = await admin_principal(db, "bench-scale-loader")
        await _ensure_projects(context, principal)
        sizes = project_sizes(store.n)
        tails = tail_sizes(sizes, store.n)
        heads = [s - t for s, t in zip(sizes, tails, strict=True)]
        if marker.get("stage") in (None, "head") and sum(heads):
            definition = marker.get("hnsw_definition") or await _index_definition(db)
            marker.update(stage="head", hnsw_definition=definition)
            store.save()
            await _autocommit(store.url, f"DROP INDEX IF EXISTS {HNSW_INDEX}")
            marker["head"] = await _store_rows(context, principal, embedder, base, sizes, heads, "head, no HNSW")
            marker["stage"] = "index"
            store.save()
        if marker.get("stage") == "index":
            if await _index_definition(db) is None:  # a rerun after a cut-off job finds it built: keep its time
                print("  building the shared HNSW index", flush=True)
                marker["hnsw_build_seconds"] = round(
                    await _autocommit(
                        store.url,
                        "SET maintenance_work_mem = '4GB'",
                        "SET max_parallel_maintenance_workers = 1",
                        marker["hnsw_definition"].replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1),
                    ),
                    1,
                )
                store.save()
            await _autocommit(store.url, "VACUUM (ANALYZE) thought")
            await refresh_thought_estimates(db)
            started = time.perf_counter()
            changes = await reconcile_project_indexes(db)
            marker["project_index_build_seconds"] = round(time.perf_counter() - started, 1)
            marker["project_indexes_built"] = len(changes.created) if changes else None
            marker["stage"] = "tail"
            store.save()
            print(
                f"  shared index {marker.get('hnsw_build_seconds')} s, {marker['project_indexes_built']} project "
                f"indexes {marker['project_index_build_seconds']} s",
                flush=True,
            )
        if marker.get("stage") in (None, "head", "tail"):
            marker["stage"] = "tail"
            store.save()
            marker["tail"] = await _store_rows(context, principal, embedder, base, sizes, sizes, "tail, all indexes")
            await _autocommit(store.url, "VACUUM (ANALYZE) thought")
            await refresh_thought_estimates(db)
            changes = await reconcile_project_indexes(db)  # a project the tail grew past a limit
            marker["tail_index_changes"] = (
                {"created": len(changes.created), "dropped": len(changes.dropped)} if changes else None
            )
            marker["stage"] = "ready"
            store.save()
    finally:
        await db.dispose()


def open_store(n: int, *, synthetic: bool = False, buffers_mb: int | None = None) -> Store:
    """`buffers_mb`: the store's shared_buffers (None: the service's own default, a quarter of RAM capped)."""
    data_dir = SCALE_ROOT.parent / (f"scale-synthetic-{n}" if synthetic else f"scale-{n}")
    embedded = EmbeddedPostgres(data_dir, server_settings=tuned_server_settings(buffers_mb))
    url = embedded.start()
    migrations.upgrade(url)
    marker_file = data_dir / "scale.json"
    fingerprint = hashlib.sha256(json.dumps([project_sizes(n), NOISE, SEED, BASE_N]).encode()).hexdigest()[:16]
    marker = json.loads(marker_file.read_text()) if marker_file.exists() else {}
    if marker and marker.get("fingerprint") != fingerprint:
        raise SystemExit(f"{data_dir} holds another plan ({marker.get('fingerprint')}): remove it to rebuild")
    marker["fingerprint"] = fingerprint
    return Store(n, url, embedded, marker_file, marker)


# ---------------------------------------------------------------- measurements


@dataclass
class Probe:
    url: str
    db: Database
    runtime: EmbeddingRuntime
    model: str
    projects: dict[int, Any]  # rank -> ProjectRecord
    queries: dict[int, list[str]]  # bench.dataset project -> query texts
    vocab_of: list[int]  # scale rank -> bench.dataset project of its thoughts


async def make_probe(store: Store, base: Base, model: str, *, as_it_stands: bool = False) -> Probe:
    """The projects as a search reads them: counted as the jobs count them, and indexed (unless `as_it_stands`:
    a build beside us owns the indexes)."""
    runtime = await offline_runtime(model=model)
    db = Database(build_engine(store.url, pool_size=4))
    await refresh_thought_estimates(db)
    if not as_it_stands:
        await reconcile_project_indexes(db)
    projects = {}
    async with db.unit_of_work() as session:
        repository = ProjectRepository(session)
        for rank in range(PROJECT_COUNT):
            found = await repository.find_for_path(project_path(rank))
            assert found is not None
            projects[rank] = found
    sizes = project_sizes(store.n)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    vocab_of = [int(base.vocab[(offsets[r] + sizes[r] // 2) % BASE_N]) for r in range(PROJECT_COUNT)]
    queries = {v: [q.text for q in generate_queries(200, seed=SEED + v, project=v)] for v in range(len(PROJECTS))}
    return Probe(store.url, db, runtime, model, projects, queries, vocab_of)


def scoped_cases(
    probe: Probe, count: int, seed: int, *, without_replacement: bool = False
) -> dict[str, list[tuple[int | None, str]]]:
    """`count` (project rank or None, query text) per class, projects taken round the class, and unscoped.
    `without_replacement`: each vocabulary's questions drawn without replacement from every distinct question
    bench.dataset can ask in it (206–345 each), so a class repeats a question only past that many; otherwise drawn
    with replacement from the probe's 200."""
    rng = random.Random(seed)
    if without_replacement:
        pools = {
            v: sorted({q.text for q in generate_queries(3000, seed=SEED + v, project=v)}) for v in range(len(PROJECTS))
        }
        left: dict[int, list[str]] = {v: [] for v in pools}

        def draw(vocabulary: int) -> str:
            if not left[vocabulary]:
                left[vocabulary] = rng.sample(pools[vocabulary], len(pools[vocabulary]))
            return left[vocabulary].pop()

    else:

        def draw(vocabulary: int) -> str:
            return rng.choice(probe.queries[vocabulary])

    cases: dict[str, list[tuple[int | None, str]]] = {}
    for name, (low, high) in CLASSES.items():
        ranks = list(range(low, high))
        rng.shuffle(ranks)
        cases[name] = [(ranks[i % len(ranks)], draw(probe.vocab_of[ranks[i % len(ranks)]])) for i in range(count)]
    cases["unscoped"] = [(None, draw(rng.randrange(len(PROJECTS)))) for _ in range(count)]
    return cases


WARM_UP_CALLS = 20


async def http_section(store: Store, probe: Probe, queries: int, work_dir: Path, passes: int = 1) -> dict[str, Any]:
    """p50/p95 over HTTP per mode and class. Each (pass, mode, class) runs on a server process of its own, so its
    query-vector cache starts empty and every question is embedded (unless the class repeats it), as real
    questions are (0.6 % of LoCoMo's repeat); the database stays up, so pass 1 meets pages outside
    shared_buffers (read from the OS cache or disk) and later passes what stayed in them."""
    async with probe.db.unit_of_work() as session:
        token, _ = await AuthService(session).create_token(f"bench-scale-{uuid.uuid4().hex[:6]}", Role.reader)
    meter = CpuMeter(store.embedded.pgdata)
    out: dict[str, Any] = {}
    cases = scoped_cases(probe, queries, seed=1, without_replacement=True)
    # Warm-up calls (a server's first calls pay its connections and statement caches): questions of another seed,
    # asked unscoped; a class that draws one of them finds it cached, and the replayed cache counts it.
    warm = [{"action": "search", "query": q} for q in sorted({q.text for q in generate_queries(40, seed=SEED - 1)})]
    for number in range(1, passes + 1):
        results = out if number == 1 else out.setdefault(f"pass {number}", {})
        for mode, extra in (("hybrid", {}), ("vector", {"hybrid": False})):
            for name, rows in cases.items():
                calls = []
                for rank, query in rows:
                    arguments: dict[str, Any] = {"action": "search", "query": query, **extra}
                    if rank is not None:
                        arguments["cwd"] = project_path(rank)
                    calls.append(arguments)
                # The server's query-vector cache, replayed: which calls found their question's vector there.
                cache = QueryVectorCache(QUERY_CACHE_ENTRIES)
                _cache_hits(cache, probe.model, warm[:WARM_UP_CALLS])
                cached = _cache_hits(cache, probe.model, calls)
                async with http_server(store.url, work_dir, meter, None, probe.model) as mcp_url:
                    await run_http(mcp_url, token, warm[:WARM_UP_CALLS], 1)
                    before = meter.snapshot()
                    latencies, _wall = await run_http(mcp_url, token, calls, 1)  # one client: in the calls' order
                    used = meter.since(before)  # while the server and its backends still run
                summary = _http_summary(latencies, cached, used)
                results[f"{mode} {name}"] = summary
                embedded = summary["embedded"]
                alone = f", embedded p50 {embedded['p50']:.1f} p95 {embedded['p95']:.1f}" if embedded else ""
                print(
                    f"  http pass {number} {mode:<6} {name:<8}: p50 {summary['p50']:6.1f} ms  p95 "
                    f"{summary['p95']:6.1f} ms  (n {summary['n']}, cache hits {summary['query_cache_hits']}{alone}, "
                    f"load1 {summary['machine']['load1']})",
                    flush=True,
                )
    return out


def _http_summary(latencies: list[float], cached: list[bool], machine: dict[str, Any]) -> dict[str, Any]:
    embedded = [seconds for seconds, hit in zip(latencies, cached, strict=True) if not hit]
    return {
        **summary_ms(latencies),
        "query_cache_hits": sum(cached),
        "embedded": summary_ms(embedded) if embedded else None,  # the calls that embedded their question
        "machine": machine,
    }


def _cache_hits(cache: QueryVectorCache, model: str, calls: list[dict[str, Any]]) -> list[bool]:
    """Per call, in order: whether its question's vector is in the server's cache when it is asked."""
    hits = []
    for call in calls:
        key = (model, call["query"])
        hits.append(cache.get(key) is not None)
        if not hits[-1]:
            cache.put(key, [])
    return hits


def _where(probe: Probe, rank: int | None) -> SearchFilter:
    if rank is None:
        return SearchFilter(None, (ThoughtStatus.active,))
    project = probe.projects[rank]
    return SearchFilter(project.id, (ThoughtStatus.active,), vector_scan=VectorScan.of(project))


async def recall_section(probe: Probe, queries: int) -> dict[str, Any]:
    from bench.search import approximate

    pool = pool_size(LIMIT)
    out: dict[str, Any] = {"pool": pool, "ef_search": hnsw_ef_search(pool)}
    for name, rows in scoped_cases(probe, queries, seed=2).items():
        r10, exact_s, leg_s, scans = [], [], [], {}
        for rank, query in rows:
            vector = await probe.runtime.embed_query(query)
            assert vector is not None
            where = _where(probe, rank)
            scans[where.vector_scan.value] = scans.get(where.vector_scan.value, 0) + 1
            async with probe.db.unit_of_work() as session:
                started = time.perf_counter()
                truth = await exact(session, vector, where, pool, model=probe.model)
                exact_s.append(time.perf_counter() - started)
            async with probe.db.unit_of_work() as session:
                found, seconds = await approximate(session, vector, where, pool, None, "auto", model=probe.model)
                found = await full_precision(session, vector, found)
            leg_s.append(seconds)
            r10.append(recall_at(found, truth, LIMIT))
        out[name] = {
            "queries": len(r10),
            "recall_at_10": round(statistics.mean(r10), 4),
            "min_recall_at_10": round(min(r10), 2),
            "scans": scans,
            "vector_leg_ms": summary_ms(leg_s),
            "exact_ms": summary_ms(exact_s),
        }
        print(
            f"  recall {name:<8}: R@10 {out[name]['recall_at_10']:.4f} (min {out[name]['min_recall_at_10']:.2f}) "
            f"scans {scans}  leg p50 {out[name]['vector_leg_ms']['p50']:.1f} ms",
            flush=True,
        )
    return out


async def explain_vector_leg(db: Database, vector: Sequence[float], where: SearchFilter, model: str) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the shipped vector leg statement (PREPAREd, a custom plan); planning and execution ms,
    and the locks the transaction then holds."""
    pool = pool_size(LIMIT)
    project_id = where.project_id if where.vector_scan is VectorScan.PROJECT_INDEX else None
    statement = _vector_leg_statement(where.shape, where.vector_scan, project_id)
    compiled = statement.compile(dialect=asyncpg_dialect())  # type: ignore[no-untyped-call]
    expanded = compiled.construct_expanded_state(
        {"vector": list(vector), "model": model, "pool": pool, **where.parameters()}
    )
    arguments = ", ".join(_literal(expanded.parameters[name]) for name in expanded.positiontup or [])
    sql = expanded.statement
    async with db.unit_of_work() as session:
        ef_search = hnsw_ef_search(pool, unscoped=where.project_id is None, scan=where.vector_scan)
        await session.execute(text(f"SET LOCAL hnsw.ef_search = {ef_search}"))
        await session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
        connection = await session.connection()
        await connection.exec_driver_sql(f"PREPARE scale_leg AS {sql}")
        try:
            result = await connection.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE scale_leg({arguments})")
            plan = result.scalar_one()
            locks = await connection.exec_driver_sql("SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()")
            lock_count = int(locks.scalar_one())
        finally:
            await connection.exec_driver_sql("DEALLOCATE scale_leg")
    plan = plan[0] if isinstance(plan, list) else json.loads(plan)[0]
    return {"planning_ms": plan["Planning Time"], "execution_ms": plan["Execution Time"], "locks": lock_count}


async def plan_section(probe: Probe, queries: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, rows in scoped_cases(probe, queries, seed=3).items():
        planning, execution, locks = [], [], []
        for rank, query in rows:
            vector = await probe.runtime.embed_query(query)
            assert vector is not None
            measured = await explain_vector_leg(probe.db, vector, _where(probe, rank), probe.model)
            planning.append(measured["planning_ms"])
            execution.append(measured["execution_ms"])
            locks.append(measured["locks"])
        out[name] = {
            "planning_ms_p50": round(statistics.median(planning), 3),
            "planning_ms_max": round(max(planning), 3),
            "execution_ms_p50": round(statistics.median(execution), 3),
            "locks": max(locks),
        }
        print(f"  plan {name:<8}: {out[name]}", flush=True)
    out["relcache"] = await relcache_bytes(probe.url)
    return out


async def relcache_bytes(url: str) -> dict[str, int]:
    """The relation cache (CacheMemoryContext and its children) and the whole backend's memory, on a fresh
    connection after one scoped and one unscoped read of `thought`."""
    db = untimed(url)
    try:
        async with db.unit_of_work() as session:
            await session.execute(text("SELECT id FROM thought WHERE project_id = gen_random_uuid() LIMIT 1"))
            await session.execute(text("SELECT id FROM thought ORDER BY created_at DESC LIMIT 1"))
            result = await session.execute(
                text(
                    "WITH cache AS (SELECT path[array_upper(path, 1)] AS id FROM pg_backend_memory_contexts "
                    "WHERE name = 'CacheMemoryContext') SELECT coalesce(sum(m.total_bytes) FILTER (WHERE "
                    "cache.id = ANY (m.path)), 0) AS cache, sum(m.total_bytes) AS total "
                    "FROM pg_backend_memory_contexts m, cache"
                )
            )
            row = result.one()
            return {"cache_memory_context_bytes": int(row.cache), "backend_bytes": int(row.total)}
    finally:
        await db.dispose()


SIZES_SQL = """
SELECT pg_database_size(current_database()) AS database,
       pg_relation_size('thought') AS thought_heap,
       pg_total_relation_size('thought') AS thought_total,
       coalesce((SELECT pg_relation_size(oid) FROM pg_class WHERE relname = 'ix_thought_embedding_hnsw'), 0) AS hnsw,
       coalesce((SELECT sum(pg_relation_size(c.oid)) FROM pg_class c WHERE starts_with(c.relname, :prefix)), 0)
         AS project_hnsw,
       (SELECT count(*) FROM pg_class c WHERE starts_with(c.relname, :prefix)) AS project_indexes,
       (SELECT count(*) FROM thought) AS thoughts,
       current_setting('shared_buffers') AS shared_buffers
"""


async def sizes_section(probe: Probe) -> dict[str, Any]:
    async with probe.db.unit_of_work() as session:
        row = (await session.execute(text(SIZES_SQL), {"prefix": project_indexes.PREFIX})).one()
        per_index = await session.execute(
            text(
                "SELECT c.relname, pg_relation_size(c.oid) AS bytes FROM pg_index i JOIN pg_class c ON "
                "c.oid = i.indexrelid WHERE i.indrelid = 'thought'::regclass AND NOT starts_with(c.relname, :prefix)"
            ),
            {"prefix": project_indexes.PREFIX},
        )
        indexes = {r.relname: int(r.bytes) for r in per_index}
    out = {key: (int(value) if key != "shared_buffers" else value) for key, value in row._mapping.items()}
    out["indexes"] = indexes
    # A search reads the heap rows it returns and walks a graph: the graphs and the heap are the working set.
    out["search_working_set_bytes"] = out["hnsw"] + out["project_hnsw"] + out["thought_heap"]
    print(f"  sizes: {json.dumps(out)}", flush=True)
    return out


WRITE_PROBE = "write probe: "
DEFAULT_SECTIONS = ["sizes", "http", "plan", "recall", "writes"]


async def writes_section(store: Store, probe: Probe, base: Base, rows: int) -> dict[str, Any]:
    """Bulk throughput of the finished store, comparable across stages in one sitting: `rows` thoughts (spread
    over the projects by size, as the tail) through bulk_create with every index in place, then deleted (their
    dead graph entries stay until a VACUUM)."""
    runtime = await offline_runtime(model=probe.model)
    assert runtime.embedder is not None
    embedder = DerivedEmbedder(runtime.embedder)
    derived = EmbeddingRuntime(EmbeddingSettings(model=probe.model, cache_dir=model_cache_dir()))
    derived.use(embedder)
    context = AppContext(probe.db, derived, settings_for(probe.model))
    call = tool_caller(context, await admin_principal(probe.db, "bench-scale-loader"))
    sizes = project_sizes(store.n)
    shares = _apportion(rows, [float(size) for size in sizes])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    seconds, calls = 0.0, 0
    try:
        for rank, count in enumerate(shares):
            if not count:
                continue
            positions = range(offsets[rank], offsets[rank] + count)
            payloads = [
                {**payload_at(base, p), "content": WRITE_PROBE + payload_at(base, p)["content"]} for p in positions
            ]
            embedder.expect([p["content"] for p in payloads], [vector_at(base, p + FULL).tolist() for p in positions])
            started = time.perf_counter()
            await call("memory_store", {"action": "bulk_create", "cwd": project_path(rank), "thoughts": payloads})
            seconds += time.perf_counter() - started
            calls += 1
    finally:
        await _autocommit(store.url, f"DELETE FROM thought WHERE starts_with(content, '{WRITE_PROBE}')")
    out = {"rows": rows, "calls": calls, "call_seconds": round(seconds, 1), "rows_per_s": round(rows / seconds, 1)}
    print(f"  writes: {out}", flush=True)
    return out


# ---------------------------------------------------------------- what a row costs PostgreSQL, by index

COST_INSERT = """
INSERT INTO thought (id, project_id, content, status, tags, embedding, embedding_model)
SELECT gen_random_uuid(), s.project_id, 'cost probe ' || s.content, s.status, s.tags,
       l2_normalize(s.embedding + (SELECT array_agg((random() - 0.5) * 0.02)::real[]
                                   FROM generate_series(1, 384) WHERE s.id IS NOT NULL)::vector),
       s.embedding_model
FROM (SELECT * FROM thought WHERE project_id = :project ORDER BY id LIMIT :rows) s
"""
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def _backend_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text()
    fields_after = fields[fields.rindex(")") + 2 :].split()
    return (int(fields_after[11]) + int(fields_after[12])) / CLOCK_TICK


async def _insert_cost(url: str, project_id: uuid.UUID, rows: int, drop: Sequence[str]) -> float:
    """Backend CPU seconds per row of one INSERT of up to `rows` copies of the project's rows (vectors perturbed),
    with the indexes `drop` dropped, all in a transaction rolled back (PostgreSQL on this machine: /proc)."""
    db = untimed(url)
    try:
        async with db.engine.connect() as connection:
            transaction = await connection.begin()
            pid = int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())
            for name in drop:
                await connection.execute(text(f'DROP INDEX "{name}"'))
            source = (
                "SELECT count(*) FROM (SELECT * FROM thought WHERE project_id = :project ORDER BY id LIMIT :rows) s"
            )
            await connection.execute(text(source), {"project": project_id, "rows": rows})  # read once: cached
            before = _backend_cpu_s(pid)
            inserted = await connection.execute(text(COST_INSERT), {"project": project_id, "rows": rows})
            used = _backend_cpu_s(pid) - before
            await transaction.rollback()
            return used / max(inserted.rowcount, 1)
    finally:
        await db.dispose()


async def cost_section(probe: Probe, rows: int = 100, repeats: int = 3) -> dict[str, Any]:
    """What a row's INSERT costs PostgreSQL in CPU (load-independent), and each index's share: the first
    project of each size class (up to `rows` copies of its rows), every index and then one dropped at a time (the
    shared graph, the project's own, the GIN indexes, the content btree), median of `repeats`, in ms per row. The
    CPU clock ticks at 10 ms: a small project's few rows say little."""
    out: dict[str, Any] = {"rows": rows, "repeats": repeats}
    async with probe.db.unit_of_work() as session:
        own = set(
            (
                await session.execute(
                    text("SELECT relname FROM pg_class WHERE starts_with(relname, :p)"), {"p": project_indexes.PREFIX}
                )
            )
            .scalars()
            .all()
        )
    for name, (low, _high) in CLASSES.items():
        project = probe.projects[low]
        own_index = project_indexes.project_index_name(project.id)
        variants: dict[str, list[str]] = {
            "every index": [],
            "without the shared HNSW": [HNSW_INDEX],
            "without ix_thought_project_tsv": ["ix_thought_project_tsv"],
            "without ix_thought_tags": ["ix_thought_tags"],
            "without ix_thought_project_content_md5": ["ix_thought_project_content_md5"],
        }
        if own_index in own:
            variants["without its own HNSW"] = [own_index]
        measured = {}
        for label, drop in variants.items():
            seconds = [await _insert_cost(probe.url, project.id, rows, drop) for _ in range(repeats)]
            measured[label] = round(statistics.median(seconds) * 1000, 2)
        out[f"{name} (t{low:04d}, own graph: {own_index in own})"] = measured
        print(f"  cost {name:<7} own graph {own_index in own!s:<5}: {measured} ms CPU per row", flush=True)
    return out


# ---------------------------------------------------------------- many partial indexes (the tenancy section)


async def tenancy_section(store: Store, probe: Probe, base: Base, counts: list[int]) -> dict[str, Any]:
    """Planning time, locks, backend memory and insert cost with K partial HNSW indexes on `thought`, one per
    project as app.db.project_indexes builds them (on the K projects that follow the huge ones, built here without
    CONCURRENTLY); dropped again at the end. Inserts: 5 bulk_create calls of 200 into a scratch project without
    an index of its own, then deleted."""
    runtime = await offline_runtime(model=probe.model)
    assert runtime.embedder is not None
    embedder = DerivedEmbedder(runtime.embedder)
    derived = EmbeddingRuntime(EmbeddingSettings(model=probe.model, cache_dir=model_cache_dir()))
    derived.use(embedder)
    context = AppContext(probe.db, derived, settings_for(probe.model))
    principal = await admin_principal(probe.db, "bench-scale-loader")
    call = tool_caller(context, principal)
    scratch = "/scale/tenancy-scratch"
    await call("memory_manage", {"action": "create", "name": "tenancy-scratch", "local_path": scratch})
    built: list[str] = []
    out: dict[str, Any] = {}
    cases = scoped_cases(probe, 20, seed=4)
    try:
        for count in counts:
            for rank in range(len(HUGE) + len(built), len(HUGE) + count):
                statement = project_indexes.create_statement(probe.projects[rank].id).replace(" CONCURRENTLY", "")
                await _autocommit(store.url, statement)
                built.append(project_indexes.project_index_name(probe.projects[rank].id))
            planning: dict[str, float] = {}
            locks = 0
            for name in ("small", "unscoped"):
                times = []
                for rank, query in cases[name]:
                    vector = await probe.runtime.embed_query(query)
                    assert vector is not None
                    measured = await explain_vector_leg(probe.db, vector, _where(probe, rank), probe.model)
                    times.append(measured["planning_ms"])
                    locks = max(locks, measured["locks"])
                planning[name] = round(statistics.median(times), 3)
            inserts = []
            for batch in range(5):
                positions = range(batch * 200, batch * 200 + 200)
                payloads = [
                    {**payload_at(base, p), "content": f"scratch {count}: " + payload_at(base, p)["content"]}
                    for p in positions
                ]
                embedder.expect([p["content"] for p in payloads], [vector_at(base, p).tolist() for p in positions])
                started = time.perf_counter()
                await call("memory_store", {"action": "bulk_create", "cwd": scratch, "thoughts": payloads})
                inserts.append(time.perf_counter() - started)
            await _autocommit(
                store.url,
                f"DELETE FROM thought WHERE project_id = (SELECT id FROM project WHERE local_path = '{scratch}')",
            )
            memory = await relcache_bytes(store.url)
            out[str(count)] = {
                "planning_ms_p50": planning,
                "locks_per_search": locks,
                "insert_rows_per_s": round(1000 / sum(inserts), 1),
                "insert_call_ms_p50": round(statistics.median(inserts) * 1000, 1),
                **memory,
            }
            print(f"  tenancy {count:>4} partial indexes: {out[str(count)]}", flush=True)
        out["concurrent_searches"] = await concurrent_lock_probe(probe, cases["small"], sessions=12)
        print(f"  tenancy {len(built)} partial indexes, 12 open searches: {out['concurrent_searches']}", flush=True)
    finally:
        for name in built:
            await _autocommit(store.url, project_indexes.drop_statement(name))
        await _autocommit(store.url, f"DELETE FROM project WHERE local_path = '{scratch}'", "VACUUM (ANALYZE) thought")
    return out


async def concurrent_lock_probe(probe: Probe, cases: list[tuple[int | None, str]], sessions: int) -> dict[str, Any]:
    """`sessions` transactions at once, each holding the locks of one scoped vector-leg statement (every index of
    `thought`), as concurrent searches do while they run: how many fail, and the lock table's size."""
    db = untimed(probe.url)
    vector = await probe.runtime.embed_query(cases[0][1])
    assert vector is not None
    gate, everyone = asyncio.Event(), asyncio.Event()
    results: list[str] = []

    def answered(outcome: str) -> None:
        results.append(outcome)
        if len(results) == sessions:
            everyone.set()

    async def one(index: int) -> None:
        rank = cases[index % len(cases)][0]
        try:
            async with db.unit_of_work() as session:
                await SearchRepository(session).vector_leg(vector, probe.model, _where(probe, rank), pool_size(LIMIT))
                answered("ok")
                await gate.wait()
        except Exception as error:  # the failure is the finding: record it
            answered(type(error).__name__ + ": " + str(error).splitlines()[0][:160])

    try:
        tasks = [asyncio.create_task(one(i)) for i in range(sessions)]
        await everyone.wait()
        gate.set()
        await asyncio.gather(*tasks)
        async with db.unit_of_work() as session:
            settings = await session.execute(
                text(
                    "SELECT current_setting('max_locks_per_transaction') AS per_tx, "
                    "current_setting('max_connections') AS connections"
                )
            )
            row = settings.one()
    finally:
        await db.dispose()
    failures = [r for r in results if r != "ok"]
    return {
        "sessions": sessions,
        "failed": len(failures),
        "first_failure": failures[0] if failures else None,
        "max_locks_per_transaction": row.per_tx,
        "max_connections": row.connections,
    }


# ---------------------------------------------------------------- main


async def measure(store: Store, base: Base, args: argparse.Namespace, work_dir: Path) -> dict[str, Any]:
    probe = await make_probe(store, base, args.model, as_it_stands=args.as_it_stands)
    sizes = project_sizes(store.n)
    results: dict[str, Any] = {
        "thoughts": store.n,
        "model": args.model,
        "machine": machine(),
        "load_start": [round(x, 2) for x in os.getloadavg()],
        "classes": {
            name: {"projects": high - low, "sizes": [min(sizes[low:high]), max(sizes[low:high])]}
            for name, (low, high) in CLASSES.items()
        },
        "store": {k: v for k, v in store.marker.items() if k != "hnsw_definition"},
    }
    async with probe.db.unit_of_work() as session:
        results["shared_buffers"] = (await session.execute(text("SHOW shared_buffers"))).scalar_one()
    try:
        sections = set(args.sections)
        if "sizes" in sections:
            results["sizes"] = await sizes_section(probe)
        if "http" in sections:
            results["http"] = await http_section(store, probe, args.queries, work_dir, args.http_passes)
        if "plan" in sections:
            results["plan"] = await plan_section(probe, args.plan_queries)
        if "recall" in sections:
            results["recall"] = await recall_section(probe, args.recall_queries)
        if "writes" in sections:
            before = CpuMeter(store.embedded.pgdata).snapshot()
            results["writes"] = await writes_section(store, probe, base, args.write_rows)
            results["writes"]["cpu"] = CpuMeter(store.embedded.pgdata).since(before)  # the probe rows' DELETE too
        if "cost" in sections:
            results["cost"] = await cost_section(probe)
        if "tenancy" in sections:
            results["tenancy"] = await tenancy_section(store, probe, base, args.tenancy)
    finally:
        await probe.db.dispose()
    results["load_end"] = [round(x, 2) for x in os.getloadavg()]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thoughts", type=int, default=10_000, choices=(10_000, 100_000, 1_000_000))
    parser.add_argument("--model", default=served_default_model())
    parser.add_argument("--queries", type=int, default=200, help="HTTP calls per mode and class")
    parser.add_argument("--recall-queries", type=int, default=50, help="per class")
    parser.add_argument("--plan-queries", type=int, default=10, help="per class")
    parser.add_argument(
        "--tenancy", type=lambda s: [int(x) for x in s.split(",")], default=[0, 20, 100, 300, 1000 - len(HUGE)]
    )
    parser.add_argument(
        "--sections",
        type=lambda v: v.split(","),
        default=DEFAULT_SECTIONS,
        help="comma-separated subset of sizes,http,plan,recall,writes,cost,tenancy (build only: none)",
    )
    parser.add_argument(
        "--synthetic-base",
        action="store_true",
        help="vectors from a hashed bag-of-words projection instead of the e5 set (stores scale-synthetic-<N>): "
        "for the write sections (writes, cost) when the e5 set is not there; recall and latency mean nothing",
    )
    parser.add_argument(
        "--as-it-stands",
        action="store_true",
        help="measure the store in whatever stage it is (e.g. beside a build still running): no loading",
    )
    parser.add_argument("--write-rows", type=int, default=2000, help="thoughts the writes section stores")
    parser.add_argument("--http-passes", type=int, default=1, help="times the http section asks every question")
    parser.add_argument(
        "--shared-buffers-mb",
        type=int,
        help="the store's shared_buffers in MB (applied by restarting it; default: the service's own setting)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    base = synthetic_base() if args.synthetic_base else load_base(args.model)
    store = open_store(args.thoughts, synthetic=args.synthetic_base, buffers_mb=args.shared_buffers_mb)
    try:
        if not args.as_it_stands:
            asyncio.run(build(store, base, args.model))
        if args.sections != ["none"]:
            with tempfile.TemporaryDirectory(prefix="synapto-bench-scale-") as tmp:
                results = asyncio.run(measure(store, base, args, Path(tmp)))
            suffix = ("-synthetic" if args.synthetic_base else "") + (
                "" if args.sections == DEFAULT_SECTIONS else "-" + "-".join(args.sections)
            )
            target = args.json or RESULTS / f"scale-{args.thoughts}{suffix}.json"
            write_results(results, target)
    finally:
        store.embedded.stop()


if __name__ == "__main__":
    main()
