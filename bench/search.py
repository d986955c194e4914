"""Benchmark: `memory_recall action=search` at scale — latency over HTTP, where the time goes, HNSW recall.

    python -m bench.search --thoughts 10000             # what `make bench-search` runs
    python -m bench.search --thoughts 100000 --clients 1,16 --queries 200
    python -m bench.search --thoughts 100000 --model sentence-transformers/all-MiniLM-L6-v2-int8-dynamic

Two commits in one sitting, on copies of one set (`cp -a` a set into two roots; `git archive <commit> | tar -x -C
<dir>` for the other commit's source), the second run failing unless every 1-client answer is the first's:

    python -m bench.search --sections http --data-root A --server-dir <dir> --answers base.json
    python -m bench.search --sections http --data-root B --same-answers base.json

`--model` (default: the served default model, multilingual-e5-small as `prepare-model` builds it) is the
model everywhere: the data set's embeddings, the HTTP server's SYNAPTO_EMBEDDING__MODEL, the in-process
runtime, the exact references and the quality section.

Dataset: `bench.dataset` (N realistic thoughts over 5 projects, 50/25/15/7/3 %) embedded with that model,
loaded once into `bench/.data/<N>` (MiniLM) or `bench/.data/<N>-<model folder>` (another model) through the
real write path and reused by later runs.

1. **HTTP** — `synaptomind serve` (create_http_app under uvicorn) in a subprocess on a free
   loopback port, offline model, rate limit and background jobs off, a bearer token created in
   the database; driven by the official MCP SDK client (`ClientSession` over streamable HTTP), one
   session per concurrent client. Modes: `hybrid` (agents' queries with their project's cwd),
   `vector` (the same with hybrid=false), `id` (a full UUID), each at every `--clients` count;
   `hybrid_all` (no cwd) and `hybrid_small` (the 3 % project) at 1 client. p50/p95/p99 and calls/s.
2. **Where the time goes** (1 client, in this process, same queries): the query embedding alone,
   `SearchService.search` (embedding timed inside it; the rest is SQL + fusion; every statement is
   timed with SQLAlchemy cursor events), the whole tool through `app.mcp.dispatch.dispatch`, and the
   HTTP call: protocol = HTTP − dispatch.
3. **HNSW recall@10** of the vector leg against exact search (the same statement with index and
   bitmap scans off) for `--recall-queries` queries, without and with the 3 % project's filter on the
   shared index, for the shipped `SearchRepository.vector_leg` and for a sweep of hnsw.ef_search values
   (latency too); then scoped to each project as the shipped leg reads it (exact scan, the project's
   own index built as the jobs would — with the same ef_search sweep —, or the shared index).
4. **Filtered full pages**: how many searches scoped to the 3 % project (and to that project plus a
   tag) return a full page of `limit` rows (min_relevance 0 so the relevance gate does not cut).
5. **Quality** (`bench.quality`): hit@1/5/10 of the fused answer at the same scale, for
   `--quality-questions` paraphrased questions whose targets are drawn from the whole store: hybrid
   (default arguments and min_relevance 0), vector only and lexical only through `dispatch`, beside
   reference rankings (bm25s BM25, exact cosine, their RRF) over the same scope.

Results go to stdout and to bench/results/search-<N>.json (MiniLM) or search-<N>-<model folder>.json
(gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgvector import Vector as PgVector
from sqlalchemy import event, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from app.config import EmbeddingSettings
from app.db.engine import Database, build_engine
from app.db.id_lists import id_in
from app.db.models import Role, Thought, ThoughtStatus
from app.db.repositories.projects import ProjectRepository
from app.db.repositories.search import SearchFilter, SearchRepository, hnsw_ef_search
from app.db.repositories.thoughts import VectorScan
from app.db.vector import index_distance, register_vector_codec
from app.embedding.embedder import Embedder, Vector
from app.embedding.profiles import ModelProfile
from app.embedding.runtime import EmbeddingRuntime
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from app.services.jobs.background import refresh_thought_estimates
from app.services.jobs.project_indexes import reconcile_project_indexes
from app.services.recall.operations import search_service
from app.services.recall.search import SearchQuery, pool_size
from app.services.scope import resolve_read_scope
from bench.common import cpu_times, free_port, machine, mcp_session, wait_ready, write_results
from bench.dataset import (
    DATA_ROOT,
    PROJECTS,
    Dataset,
    SeedQuery,
    admin_principal,
    dataset_dir,
    describe,
    generate_queries,
    model_cache_dir,
    offline_runtime,
    open_dataset,
    served_default_model,
    settings_for,
    tool_caller,
)
from bench.quality import quality_section

RESULTS = Path(__file__).resolve().parent / "results"
SMALL = len(PROJECTS) - 1  # the 3 % project
LIMIT = 10
SHIPPED_EF = "max(200, min(pool, 1000))"

# ---------------------------------------------------------------- statistics and machine state


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank on sorted values)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    ms = [value * 1000 for value in seconds]
    return {
        "n": len(ms),
        "mean": round(statistics.mean(ms), 2),
        "p50": round(pct(ms, 50), 2),
        "p95": round(pct(ms, 95), 2),
        "p99": round(pct(ms, 99), 2),
        "max": round(max(ms), 2),
    }


class CpuMeter:
    """CPU seconds of this process, the server subprocess and the embedded PostgreSQL, and of the machine."""

    def __init__(self, pgdata: Path | None) -> None:
        self.pgdata = pgdata
        self.server_pid: int | None = None
        self.ticks = os.sysconf("SC_CLK_TCK")

    def _postmaster(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split()[0]) if self.pgdata else None
        except (OSError, ValueError, IndexError):
            return None

    def snapshot(self) -> dict[str, Any]:
        """CPU ticks per (role, pid), the machine's (busy, total) jiffies and the wall clock."""
        ticks: dict[tuple[str, int], int] = {}
        postmaster = self._postmaster()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                content = (entry / "stat").read_text()
            except OSError:
                continue
            fields = content[content.rindex(")") + 2 :].split()
            pid, parent, used = int(entry.name), int(fields[1]), int(fields[11]) + int(fields[12])
            if pid == os.getpid():
                ticks[("client", pid)] = used
            elif pid == self.server_pid:
                ticks[("server", pid)] = used
            elif postmaster is not None and (pid == postmaster or parent == postmaster):
                ticks[("postgres", pid)] = used
        return {"ticks": ticks, "machine": cpu_times(), "wall": time.perf_counter()}

    def since(self, before: dict[str, Any]) -> dict[str, Any]:
        """CPU seconds per role since `before` (a process that ended in between is lost: a small undercount)."""
        after = self.snapshot()
        wall = after["wall"] - before["wall"]
        cpu = {"client": 0.0, "server": 0.0, "postgres": 0.0}
        for key, used in after["ticks"].items():
            cpu[key[0]] += (used - before["ticks"].get(key, 0)) / self.ticks
        result: dict[str, Any] = {"wall_s": round(wall, 2), **{f"{k}_cpu_s": round(v, 2) for k, v in cpu.items()}}
        if before["machine"] and after["machine"]:
            busy = after["machine"][0] - before["machine"][0]
            total = after["machine"][1] - before["machine"][1]
            cores = os.cpu_count() or 1
            machine_busy_s = busy / max(total, 1) * wall * cores
            result["machine_busy"] = round(busy / max(total, 1), 2)  # share of all cores busy
            result["others_cpu_s"] = round(max(0.0, machine_busy_s - sum(cpu.values())), 2)
        result["load1"] = round(os.getloadavg()[0], 2)
        return result


async def versions(db: Database) -> str:
    async with db.unit_of_work() as session:
        pg = (await session.execute(text("SHOW server_version"))).scalar_one()
        vector = (await session.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))).scalar()
        buffers = (await session.execute(text("SHOW shared_buffers"))).scalar_one()
    return f"PostgreSQL {pg} + pgvector {vector} (shared_buffers {buffers})"


# ---------------------------------------------------------------- in-process timing helpers


class TimedEmbedder:
    """The real embedder, adding up the seconds spent embedding queries."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.profile: ModelProfile = inner.profile
        self.seconds = 0.0

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text_: str) -> Vector:
        started = time.perf_counter()
        try:
            return await self.inner.embed_query(text_)
        finally:
            self.seconds += time.perf_counter() - started


@dataclass
class StatementClock:
    """Seconds per kind of SQL statement on one engine (cursor execute to return, round trip included)."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    armed: bool = False

    @staticmethod
    def kind(statement: str) -> str:
        flat = " ".join(statement.split()).lower()
        if flat.startswith("set local") or flat.startswith("select set_config"):
            return "set local"
        if "<=>" in flat and "order by" in flat:
            return "vector leg"
        if "@@" in flat:
            return "lexical leg"
        if "thought_hit" in flat or "primer" in flat:
            return "hit counting"
        if "array_agg" in flat:
            return "page (thoughts, distances, standing edges)"
        if "from edge" in flat:
            return "standing edges"
        if "from project" in flat:
            return "scope (project)"
        if "from thought" in flat:
            return "records"
        return "other"

    def attach(self, db: Database) -> None:
        started: dict[int, float] = {}

        def before(conn: Connection, cursor: Any, statement: str, *args: Any) -> None:
            started[id(cursor)] = time.perf_counter()

        def after(conn: Connection, cursor: Any, statement: str, *args: Any) -> None:
            begin = started.pop(id(cursor), None)
            if begin is None or not self.armed:
                return
            kind = self.kind(statement)
            self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - begin
            self.calls[kind] = self.calls.get(kind, 0) + 1

        event.listen(db.engine.sync_engine, "before_cursor_execute", before)
        event.listen(db.engine.sync_engine, "after_cursor_execute", after)

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()


# ---------------------------------------------------------------- the HTTP server and clients


def start_server(port: int, env: dict[str, str], log_path: Path, source: Path | None = None) -> subprocess.Popen[bytes]:
    """`source`: the folder whose `app` is served (the current directory's by default)."""
    with log_path.open("wb") as log:
        # One worker: the figures are of one serving process (its CPU is the server's; `--workers` is bench.load's).
        command = [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=source)


@asynccontextmanager
async def http_server(
    url: str, work_dir: Path, meter: CpuMeter, threads: int | None, model: str, source: Path | None = None
) -> AsyncIterator[str]:
    """`python -m app serve` (create_http_app under uvicorn) serving `model` on a free loopback port; yields the
    /mcp URL."""
    port = free_port()
    env = {
        **os.environ,
        "SYNAPTO_DATABASE_URL": url,
        "SYNAPTO_DATA_DIR": str(work_dir / "data"),
        "SYNAPTO_EMBEDDING__MODEL": model,
        "SYNAPTO_EMBEDDING__CACHE_DIR": str(model_cache_dir()),
        "SYNAPTO_RATE_LIMIT__PER_MINUTE": "0",
        "SYNAPTO_JOBS__ENABLED": "false",
        "SYNAPTO_LOG_LEVEL": "WARNING",
    }
    if threads is not None:
        env["SYNAPTO_EMBEDDING__THREADS"] = str(threads)
    server = start_server(port, env, work_dir / "server.log", source)
    meter.server_pid = server.pid
    base = f"http://127.0.0.1:{port}"
    try:
        await asyncio.to_thread(wait_ready, base, server)
        yield f"{base}/mcp"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        meter.server_pid = None


@dataclass(frozen=True)
class Mode:
    name: str
    build: str  # "query" | "id"
    extra: dict[str, Any]
    cwd: str  # "skew" | "none" | "small"


MODES = {
    "hybrid": Mode("hybrid", "query", {}, "skew"),
    "vector": Mode("vector", "query", {"hybrid": False}, "skew"),
    "id": Mode("id", "id", {}, "skew"),
    "hybrid_all": Mode("hybrid_all", "query", {}, "none"),
    "hybrid_small": Mode("hybrid_small", "query", {}, "small"),
}


def arguments_for(mode: Mode, queries: list[SeedQuery], small: list[SeedQuery], ids: list[str]) -> list[dict[str, Any]]:
    calls = []
    source = small if mode.cwd == "small" else queries
    for index, query in enumerate(source):
        args: dict[str, Any] = {"action": "search", **mode.extra}
        args["query"] = ids[index % len(ids)] if mode.build == "id" else query.text
        if mode.cwd != "none":
            args["cwd"] = PROJECTS[query.project].cwd
        calls.append(args)
    return calls


async def run_http(
    mcp_url: str, token: str, calls: list[dict[str, Any]], clients: int, answers: list[Any] | None = None
) -> tuple[list[float], float]:
    """Every call once, spread over `clients` concurrent sessions; (latencies, wall seconds). `answers`, when
    given, receives each call's structured result at the call's index (for `--answers` / `--same-answers`)."""
    work: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
    for index, call in enumerate(calls):
        work.put_nowait((index, call))
    if answers is not None:
        answers[:] = [None] * len(calls)
    latencies: list[float] = []
    ready = asyncio.Barrier(clients + 1)
    finished = asyncio.Event()
    release = asyncio.Event()

    async def client() -> None:
        async with mcp_session(mcp_url, token) as session:
            await ready.wait()
            while not work.empty():
                index, arguments = work.get_nowait()
                started = time.perf_counter()
                result = await session.call_tool("memory_recall", arguments)
                latencies.append(time.perf_counter() - started)
                if result.is_error:
                    detail = "".join(getattr(block, "text", "") for block in result.content)
                    raise SystemExit(f"search failed: {detail[:300]}")
                if answers is not None:
                    text_ = "".join(getattr(block, "text", "") for block in result.content)
                    answers[index] = {"arguments": arguments, "structured": result.structured_content, "text": text_}
                if len(latencies) == len(calls):
                    finished.set()
            await release.wait()  # every session stays open until all calls are done

    tasks = [asyncio.create_task(client()) for _ in range(clients)]
    await ready.wait()
    started = time.perf_counter()
    waiter = asyncio.create_task(finished.wait())
    await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    wall = time.perf_counter() - started
    release.set()
    await asyncio.gather(*tasks)
    waiter.cancel()
    return latencies, wall


def answer_differences(reference: dict[str, list[Any]], answers: dict[str, list[Any]]) -> list[str]:
    """Where two runs' answers differ (`--same-answers`): per mode, every call's whole structured result and its
    text (ids, their order, every meta key and warning; the content text mirrors it), in the order sent."""
    differences: list[str] = []
    for mode, calls in answers.items():
        expected = reference.get(mode)
        if expected is None:
            differences.append(f"{mode}: not in the reference")
            continue
        if len(expected) != len(calls):
            differences.append(f"{mode}: {len(calls)} calls, the reference has {len(expected)}")
            continue
        for index, (mine, theirs) in enumerate(zip(calls, expected, strict=True)):
            if mine != theirs:
                ids = [
                    item.get("thought", {}).get("id")
                    for item in (mine or {}).get("structured", {}).get("result", {}).get("items", [])
                ]
                differences.append(f"{mode} call {index}: differs (ids now {ids})")
    return differences


# ---------------------------------------------------------------- vector-leg statements for recall


def vector_statement(
    vector: Sequence[float], where: SearchFilter, pool: int, *, model: str, exact: bool = False
) -> Any:
    """The shipped vector leg's SELECT (app/db/repositories/search.py), without its SET LOCALs.

    exact: order by the full-precision distance (the ground truth) instead of the index's half-precision one.
    """
    distance = Thought.embedding.cosine_distance(list(vector)) if exact else index_distance(Thought.embedding, vector)
    return (
        select(Thought.id, distance.label("distance"))
        .where(Thought.embedding_model == model, *where.clauses())
        .order_by(distance)
        .limit(pool)
    )


async def exact(
    session: AsyncSession, vector: Sequence[float], where: SearchFilter, pool: int, *, model: str
) -> list[Any]:
    await session.execute(text("SET LOCAL enable_indexscan = off"))
    await session.execute(text("SET LOCAL enable_bitmapscan = off"))
    rows = (await session.execute(vector_statement(vector, where, pool, model=model, exact=True))).all()
    return sorted(((row.id, float(row.distance)) for row in rows), key=lambda row: row[1])


async def approximate(
    session: AsyncSession,
    vector: Sequence[float],
    where: SearchFilter,
    pool: int,
    ef: int | None,
    plan: str,
    *,
    model: str,
) -> tuple[list[Any], float]:
    """(rows nearest first, seconds of the SELECT): ef=None = the shipped SearchRepository.vector_leg.

    plan: "auto" = PostgreSQL's own choice, "custom"/"generic" = plan_cache_mode forced for this transaction
    (a prepared statement runs on a generic plan once it has run 5 times on a connection and the generic
    plan looks no dearer than the custom ones), "hnsw" = custom plan with enable_sort off, which makes the
    planner take the HNSW index scan (with its iterative scan for filters) instead of an exact btree + sort.
    """
    if plan in ("custom", "generic"):
        await session.execute(text(f"SET LOCAL plan_cache_mode = force_{plan}_plan"))
    if plan == "hnsw":  # a custom plan pushed onto the HNSW ordered scan (the planner may prefer btree + sort)
        await session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
        await session.execute(text("SET LOCAL enable_sort = off"))
    if ef is None:
        started = time.perf_counter()
        rows = await SearchRepository(session).vector_leg(vector, model, where, pool)
        return rows, time.perf_counter() - started
    await session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
    await session.execute(text(f"SET LOCAL hnsw.ef_search = {int(ef)}"))
    started = time.perf_counter()
    result = (await session.execute(vector_statement(vector, where, pool, model=model))).all()
    seconds = time.perf_counter() - started
    return sorted(((row.id, float(row.distance)) for row in result), key=lambda row: row[1]), seconds


async def full_precision(session: AsyncSession, vector: Sequence[float], found: Sequence[Any]) -> list[Any]:
    """The found rows in their order, with the full-precision distance the exact search ranks by.

    The index ranks by half-precision distances (within ~1e-3); recall compares both in one metric, or a
    tie of many equally near rows at the k-th distance would count as misses.
    """
    distance = Thought.embedding.cosine_distance(list(vector))
    statement = select(Thought.id, distance.label("distance")).where(id_in(Thought.id, [row[0] for row in found]))
    exact_distance = {row.id: float(row.distance) for row in await session.execute(statement)}
    return [(row[0], exact_distance[row[0]]) for row in found]


def recall_at(found: list[Any], truth: list[Any], k: int) -> float:
    """Share of the exact top-k found in the approximate top-k (a tie at the k-th distance counts)."""
    if not truth:
        return 1.0
    top = truth[:k]
    cutoff = top[-1][1] + 1e-6
    want = {row[0] for row in top}
    got = found[:k]
    hits = sum(1 for row in got if row[0] in want or row[1] <= cutoff)
    return min(1.0, hits / len(top))


def _literal(value: Any) -> str:
    if isinstance(value, PgVector):
        value = value.to_list()
    if isinstance(value, list | tuple) and len(value) > 16:
        return "'[" + ",".join(repr(float(x)) for x in value) + "]'"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return "'" + str(getattr(value, "value", value)).replace("'", "''") + "'"


async def explain(
    db: Database, vector: Sequence[float], where: SearchFilter, pool: int, mode: str, *, model: str
) -> list[str]:
    """EXPLAIN ANALYZE of the shipped vector leg's exact statement (same SET LOCALs) for one query: PREPAREd
    and EXECUTEd with plan_cache_mode forced, i.e. planned for these values (custom) or generically (generic,
    as a prepared statement that already ran 5 times on a pooled connection may be)."""
    from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

    pg_dialect = asyncpg_dialect()  # type: ignore[no-untyped-call]
    compiled = vector_statement(vector, where, pool, model=model).compile(
        dialect=pg_dialect, compile_kwargs={"render_postcompile": True}
    )
    names = list(compiled.positiontup or [])
    arguments = ", ".join(_literal(compiled.params[name]) for name in names)
    async with db.unit_of_work() as session:
        await session.execute(text("SET LOCAL hnsw.iterative_scan = relaxed_order"))
        ef_search = hnsw_ef_search(pool, unscoped=where.project_id is None, scan=where.vector_scan)
        await session.execute(text(f"SET LOCAL hnsw.ef_search = {ef_search}"))
        await session.execute(text(f"SET LOCAL plan_cache_mode = force_{mode}_plan"))
        connection = await session.connection()
        await connection.exec_driver_sql(f"PREPARE bench_vector_leg AS {compiled}")
        try:
            result = await connection.exec_driver_sql(
                f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE bench_vector_leg({arguments})"
            )
            lines = [str(row[0]) for row in result]
        finally:
            await connection.exec_driver_sql("DEALLOCATE bench_vector_leg")
    return [re.sub(r"'\[[^']*\]'::vector", "$query_vector", line) for line in lines]


# ---------------------------------------------------------------- the benchmark


@dataclass
class Setup:
    model: str
    db: Database
    runtime: EmbeddingRuntime
    timed: TimedEmbedder
    clock: StatementClock
    context: AppContext
    token: str
    projects: dict[str, uuid.UUID]
    ids: list[str]
    queries: list[SeedQuery]
    small: list[SeedQuery]
    recall_queries: list[SeedQuery]


async def prepare(dataset: Dataset, args: argparse.Namespace) -> Setup:
    inner = await offline_runtime(args.embed_threads, model=dataset.model)
    assert inner.embedder is not None
    timed = TimedEmbedder(inner.embedder)
    runtime = EmbeddingRuntime(EmbeddingSettings(model=dataset.model, cache_dir=model_cache_dir()))
    runtime.use(timed)
    db = Database(build_engine(dataset.url, pool_size=4))
    clock = StatementClock()
    clock.attach(db)
    # The server below runs without its background jobs (no decay during a run); count the projects and build
    # their vector indexes as the jobs would, so the vector leg chooses its plan as in a deployment that runs them.
    await refresh_thought_estimates(db)
    await reconcile_project_indexes(db)
    async with db.unit_of_work() as session:
        token, _ = await AuthService(session).create_token(f"bench-search-{uuid.uuid4().hex[:6]}", Role.reader)
        projects = {
            row.name: row.id
            for row in await session.execute(text("SELECT name, id FROM project WHERE local_path LIKE '/bench/%'"))
        }
        id_rows = await session.execute(
            text("SELECT id FROM thought WHERE status = 'active' ORDER BY hashtext(content) LIMIT :n"),
            {"n": args.queries},
        )
        ids = [str(row.id) for row in id_rows]
    rng = random.Random(7)
    # Full UUIDs as agents paste them: mostly canonical, some upper case or without hyphens.
    ids = [i.upper() if rng.random() < 0.2 else i.replace("-", "") if rng.random() < 0.2 else i for i in ids]
    return Setup(
        model=dataset.model,
        db=db,
        runtime=runtime,
        timed=timed,
        clock=clock,
        context=AppContext(db, runtime, settings_for(dataset.model)),
        token=token,
        projects=projects,
        ids=ids,
        queries=generate_queries(args.queries),
        small=generate_queries(args.queries, seed=99, project=SMALL),
        recall_queries=generate_queries(args.recall_queries, seed=123),
    )


async def http_section(
    setup: Setup, mcp_url: str, args: argparse.Namespace, meter: CpuMeter, answers: dict[str, list[Any]]
) -> list[dict[str, Any]]:
    """Latency and CPU per mode and client count; `answers` receives each 1-client mode's answers."""
    rows = []
    warm = arguments_for(MODES["hybrid"], generate_queries(20, seed=5), [], setup.ids)
    await run_http(mcp_url, setup.token, warm, 1)
    plan = [(name, clients) for name in ("hybrid", "vector", "id") for clients in args.clients]
    plan += [("hybrid_all", 1), ("hybrid_small", 1)]
    plan = [(name, clients) for name, clients in plan if not args.modes or name in args.modes]
    for name, clients in plan:
        mode = MODES[name]
        calls = arguments_for(mode, setup.queries, setup.small, setup.ids)
        await run_http(mcp_url, setup.token, calls[: max(clients * 2, 10)], clients)  # warm this mode's path
        recorded: list[Any] | None = [] if clients == 1 else None
        before = meter.snapshot()
        latencies, wall = await run_http(mcp_url, setup.token, calls, clients, recorded)
        cpu = meter.since(before)
        if recorded is not None:
            answers[name] = recorded
        stats = summary_ms(latencies)
        row = {"mode": name, "clients": clients, **stats, "calls_per_s": round(len(latencies) / wall, 1), **cpu}
        rows.append(row)
        print(
            f"  http {name:<13} clients {clients:>2}: p50 {stats['p50']:6.1f}  p95 {stats['p95']:6.1f}  "
            f"p99 {stats['p99']:6.1f} ms  {row['calls_per_s']:6.1f} calls/s   "
            f"(CPU s client {cpu['client_cpu_s']}, server {cpu['server_cpu_s']}, pg {cpu['postgres_cpu_s']}, "
            f"others {cpu.get('others_cpu_s')}; load {cpu['load1']})",
            flush=True,
        )
    return rows


async def breakdown_section(setup: Setup, mcp_url: str) -> dict[str, Any]:
    """1 client, in this process, interleaved per query so machine noise hits every level alike.

    For each query: the embedding alone, then (in a rotating order) SearchService.search in a unit of
    work (scope resolution included, embedding timed inside, statements timed by cursor events), the whole
    tool through dispatch, and the HTTP call. protocol = HTTP − dispatch; tool layer = dispatch − service.
    """
    principal = await admin_principal(setup.db, "bench-search-inprocess")
    call = tool_caller(setup.context, principal)
    result: dict[str, Any] = {}
    async with mcp_session(mcp_url, setup.token) as session:

        async def service_call(arguments: dict[str, Any]) -> tuple[str, float, float]:
            """(level, seconds, embedding seconds inside)."""
            setup.timed.seconds = 0.0
            setup.clock.armed = True
            started = time.perf_counter()
            async with setup.db.unit_of_work() as unit:
                scope = await resolve_read_scope(ProjectRepository(unit), arguments.get("cwd"))
                project = scope.project.id if scope.project else None
                where = SearchFilter(project, (ThoughtStatus.active,), None, None, None)
                hybrid = arguments.get("hybrid", True)
                query = SearchQuery(text=arguments["query"], where=where, limit=LIMIT, hybrid=hybrid)
                await search_service(unit, setup.context).search(query)
            elapsed = time.perf_counter() - started
            setup.clock.armed = False
            return "service", elapsed, setup.timed.seconds

        async def dispatch_call(arguments: dict[str, Any]) -> tuple[str, float, float]:
            started = time.perf_counter()
            await call("memory_recall", arguments)
            return "dispatch", time.perf_counter() - started, 0.0

        async def http_call(arguments: dict[str, Any]) -> tuple[str, float, float]:
            started = time.perf_counter()
            answer = await session.call_tool("memory_recall", arguments)
            assert not answer.is_error
            return "http", time.perf_counter() - started, 0.0

        steps = (service_call, dispatch_call, http_call)
        for name in ("hybrid", "vector", "id"):
            mode = MODES[name]
            calls = arguments_for(mode, setup.queries, setup.small, setup.ids)
            times: dict[str, list[float]] = {"embed_alone": [], "service": [], "dispatch": [], "http": []}
            embed_inside = 0.0
            setup.clock.reset()
            for index, arguments in enumerate(calls):
                if mode.build == "query":
                    started = time.perf_counter()
                    await setup.runtime.embed_query(arguments["query"])
                    times["embed_alone"].append(time.perf_counter() - started)
                for offset in range(3):
                    level, seconds, embedded = await steps[(index + offset) % 3](arguments)
                    times[level].append(seconds)
                    embed_inside += embedded
            n = len(calls)
            statements = {k: round(v / n * 1000, 2) for k, v in sorted(setup.clock.seconds.items())}
            embed_ms = embed_inside / n * 1000
            service_ms = statistics.mean(times["service"]) * 1000
            dispatch_ms = statistics.mean(times["dispatch"]) * 1000
            http_ms = statistics.mean(times["http"]) * 1000
            statement_ms = sum(statements.values())
            parts = {
                "embedding": embed_ms,
                "sql_statements": statement_ms,
                "service_python": service_ms - embed_ms - statement_ms,
                "tool_layer": dispatch_ms - service_ms,
                "protocol": http_ms - dispatch_ms,
            }
            result[name] = {
                "embed_alone_ms": summary_ms(times["embed_alone"]) if times["embed_alone"] else None,
                "service_ms": summary_ms(times["service"]),
                "dispatch_ms": summary_ms(times["dispatch"]),
                "http_ms": summary_ms(times["http"]),
                "statements_mean_ms": statements,
                "statement_calls_per_search": {k: round(v / n, 2) for k, v in sorted(setup.clock.calls.items())},
                "parts_mean_ms": {k: round(v, 2) for k, v in parts.items()},
                "parts_share": {k: round(v / http_ms, 3) for k, v in parts.items()},
            }
            shares = ", ".join(f"{k} {v:.1f} ms ({v / http_ms:.0%})" for k, v in parts.items())
            print(f"  breakdown {name:<7} (mean HTTP {http_ms:.1f} ms): {shares}", flush=True)
            print(f"    statements (mean ms per search): {statements}", flush=True)
    return result


async def recall_section(setup: Setup, efs: list[int]) -> dict[str, Any]:
    """Without a filter and for the 3 % project walking the shared index: the shipped leg, its plans and an
    ef_search sweep. Then every project as the shipped leg reads it (VectorScan.of: exact scan, own index or
    the shared walk)."""
    pool = pool_size(LIMIT)
    small_id = setup.projects[PROJECTS[SMALL].name]
    sweep = [(None, "auto"), (None, "custom"), (None, "generic"), (None, "hnsw")] + [(ef, "hnsw") for ef in efs]
    filters: dict[str, tuple[SearchFilter, list[tuple[int | None, str]]]] = {
        "all projects": (SearchFilter(None, (ThoughtStatus.active,)), sweep),
        f"project {PROJECTS[SMALL].name} shared": (SearchFilter(small_id, (ThoughtStatus.active,)), sweep),
    }
    async with setup.db.unit_of_work() as session:
        for seed in PROJECTS:
            project = await ProjectRepository(session).get(setup.projects[seed.name])
            assert project is not None
            scan = VectorScan.of(project)
            where = SearchFilter(project.id, (ThoughtStatus.active,), vector_scan=scan)
            # A project's own graph: its sweep too (the custom plan matches the partial index's predicate).
            own_sweep = [(ef, "hnsw") for ef in efs] if scan is VectorScan.PROJECT_INDEX else []
            filters[f"{seed.name} {seed.share:.0%} {scan.value}"] = (where, [(None, "auto"), *own_sweep])
    vectors: list[Vector] = []
    for query in setup.recall_queries:
        vector = await setup.runtime.embed_query(query.text)
        assert vector is not None
        vectors.append(vector)
    out: dict[str, Any] = {"pool": pool, "shipped_ef_search": hnsw_ef_search(pool), "filters": {}}
    for label, (where, variants) in filters.items():
        truths = []
        exact_times = []
        for vector in vectors:
            async with setup.db.unit_of_work() as session:
                started = time.perf_counter()
                truths.append(await exact(session, vector, where, pool, model=setup.model))
                exact_times.append(time.perf_counter() - started)
        rows = []
        for ef, plan in variants:
            r10, r100, times, returned = [], [], [], []
            for vector, truth in zip(vectors, truths, strict=True):
                async with setup.db.unit_of_work() as session:
                    found, seconds = await approximate(session, vector, where, pool, ef, plan, model=setup.model)
                    found = await full_precision(session, vector, found)
                r10.append(recall_at(found, truth, 10))
                r100.append(recall_at(found, truth, pool))
                times.append(seconds)
                returned.append(len(found))
            row: dict[str, Any] = {
                "ef_search": "shipped" if ef is None else ef,
                "plan": plan,
                "recall_at_10": round(statistics.mean(r10), 4),
                "min_recall_at_10": round(min(r10), 2),
                f"recall_at_{pool}": round(statistics.mean(r100), 4),
                "full_pool_share": round(sum(1 for n in returned if n >= min(pool, len(truths[0]))) / len(returned), 3),
                "ms": summary_ms(times),
            }
            rows.append(row)
            print(
                f"  recall {label:<26} ef {row['ef_search']!s:>7} {plan:<7}: R@10 {row['recall_at_10']:.4f} "
                f"(min {row['min_recall_at_10']:.1f})  R@{pool} {row[f'recall_at_{pool}']:.4f}  "
                f"p50 {row['ms']['p50']:5.2f} ms  p95 {row['ms']['p95']:5.2f} ms",
                flush=True,
            )
        plans = {}
        if len(variants) > 1:
            plans = {
                mode: await explain(setup.db, vectors[0], where, pool, mode, model=setup.model)
                for mode in ("custom", "generic")
            }
        out["filters"][label] = {
            "queries": len(vectors),
            "exact_ms": summary_ms(exact_times),
            "rows": rows,
            "plans": plans,
        }
        for mode, lines in plans.items():
            nodes = [line.strip() for line in lines if "->" in line or line == lines[0] or "Execution Time" in line]
            print(f"    {mode} plan: " + " | ".join(nodes), flush=True)
    return out


def generic_plan_database(url: str) -> Database:
    """The app's engine, but every connection plans prepared statements generically (plan_cache_mode)."""
    settings = {"application_name": "bench-generic", "plan_cache_mode": "force_generic_plan"}
    engine = create_async_engine(url, pool_size=2, connect_args={"server_settings": settings})
    event.listen(engine.sync_engine, "connect", lambda dbapi, _: dbapi.run_async(register_vector_codec))
    return Database(engine)


async def full_page_section(setup: Setup, url: str) -> dict[str, Any]:
    """Searches scoped to the 3 % project (and to it plus a tag): the share that fill `limit` rows,
    with PostgreSQL's own plan choice and with generic plans forced (what a warm pooled connection may use)."""
    out: dict[str, Any] = {}
    generic = generic_plan_database(url)
    try:
        for plan, db in (("auto", setup.db), ("generic", generic)):
            out[plan] = await full_pages(setup, AppContext(db, setup.runtime, settings_for(setup.model)), plan)
    finally:
        await generic.dispose()
    return out


async def full_pages(setup: Setup, context: AppContext, plan: str) -> dict[str, Any]:
    principal = await admin_principal(setup.db, "bench-search-inprocess")
    call = tool_caller(context, principal)
    small = PROJECTS[SMALL]
    async with setup.db.unit_of_work() as session:
        tag_counts = await session.execute(
            text(
                "SELECT tag, count(*) AS n FROM thought t JOIN project p ON p.id = t.project_id, unnest(t.tags) tag "
                "WHERE p.name = :p AND t.status = 'active' GROUP BY tag ORDER BY n DESC"
            ),
            {"p": small.name},
        )
        tags = {row.tag: int(row.n) for row in tag_counts}
    rare_tag = next((tag for tag, n in sorted(tags.items(), key=lambda kv: kv[1]) if n >= LIMIT), None)
    cases: list[tuple[str, dict[str, Any], int]] = []
    for limit in (LIMIT, 100):
        cases.append((f"{small.name}, vector, limit {limit}", {"hybrid": False, "limit": limit}, limit))
        cases.append((f"{small.name}, hybrid, limit {limit}", {"limit": limit}, limit))
    if rare_tag is not None:
        cases.append(
            (
                f"{small.name} + tag {rare_tag} ({tags[rare_tag]} rows), vector",
                {"hybrid": False, "tag": rare_tag},
                LIMIT,
            )
        )
    out = {}
    for label, extra, limit in cases:
        times: list[float] = []
        full = 0
        returned = []
        for query in setup.small[:100]:
            arguments = {"action": "search", "query": query.text, "cwd": small.cwd, "min_relevance": 0, **extra}
            started = time.perf_counter()
            answer = await call("memory_recall", arguments)
            times.append(time.perf_counter() - started)
            got = answer["meta"]["counts"]["returned"]
            returned.append(got)
            full += got >= limit
        out[label] = {
            "queries": len(returned),
            "full_page_share": round(full / len(returned), 3),
            "min_returned": min(returned),
            "ms": summary_ms(times),
        }
        print(
            f"  full pages ({plan} plan) {label:<42}: {full}/{len(returned)} (fewest rows {min(returned)}), "
            f"p50 {pct(times, 50) * 1000:.1f} ms, p95 {pct(times, 95) * 1000:.1f} ms",
            flush=True,
        )
    return out


def compare_answers(args: argparse.Namespace, answers: dict[str, list[Any]]) -> None:
    """`--answers PATH`: keep this run's 1-client answers; `--same-answers PATH`: fail unless they are exactly
    those of that earlier run (another commit's, on a copy of the same store: a latency cut must not change one)."""
    if args.answers is not None:
        args.answers.write_text(json.dumps(answers, default=str) + "\n")
        print(f"answers: {args.answers} ({sum(len(calls) for calls in answers.values())} calls)", flush=True)
    if args.same_answers is not None:
        reference = json.loads(args.same_answers.read_text())
        differences = answer_differences(reference, json.loads(json.dumps(answers, default=str)))
        compared = sum(len(calls) for calls in answers.values())
        for line in differences[:20]:
            print(f"  answer differs: {line}", flush=True)
        if differences:
            raise SystemExit(f"{len(differences)} of {compared} answers differ from {args.same_answers}")
        print(f"answers: all {compared} identical to {args.same_answers}", flush=True)


async def main_async(dataset: Dataset, args: argparse.Namespace, work_dir: Path) -> dict[str, Any]:
    meter = CpuMeter(dataset.pgdata)
    setup = await prepare(dataset, args)
    info = {
        "thoughts": args.thoughts,
        "model": dataset.model,
        "machine": machine(),
        "database": await versions(setup.db),
        "dataset": await describe(dataset.url),
        "queries": args.queries,
        "recall_queries": args.recall_queries,
        "load_start": [round(x, 2) for x in os.getloadavg()],
        "server_embedding_threads": args.embed_threads,
    }
    print(json.dumps(info, indent=1), flush=True)
    results: dict[str, Any] = {"info": info}
    try:
        sections = set(args.sections)
        if sections & {"http", "breakdown"}:
            async with http_server(
                dataset.url, work_dir, meter, args.embed_threads, dataset.model, args.server_dir
            ) as mcp_url:
                if "http" in sections:
                    answers: dict[str, list[Any]] = {}
                    results["http"] = await http_section(setup, mcp_url, args, meter, answers)
                    compare_answers(args, answers)
                if "breakdown" in sections:
                    before = meter.snapshot()
                    results["breakdown"] = await breakdown_section(setup, mcp_url)
                    results["breakdown"]["machine"] = meter.since(before)
        if "recall" in sections:
            results["recall"] = await recall_section(setup, args.ef)
        if "pages" in sections:
            results["full_pages"] = await full_page_section(setup, dataset.url)
        if "quality" in sections:  # last: its searches count hits, which the latency sections should not see
            results["quality"] = await quality_section(
                setup.db, setup.runtime, args.quality_questions, args.quality_unscoped
            )
    finally:
        await setup.db.dispose()
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average at start {info['load_start']}, at end {info['load_end']}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thoughts", type=int, default=10_000)
    parser.add_argument(
        "--model",
        default=served_default_model(),
        help="the offline model of the data set, the server and the references (default: the served default, "
        "%(default)s)",
    )
    parser.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16])
    parser.add_argument("--queries", type=int, default=200, help="calls per HTTP mode (and in-process pass)")
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--ef", type=lambda s: [int(x) for x in s.split(",")], default=[40, 64, 100, 200, 400])
    parser.add_argument(
        "--sections",
        type=lambda v: v.split(","),
        default=["http", "breakdown", "recall", "pages", "quality"],
        help="comma-separated subset of http,breakdown,recall,pages,quality",
    )
    parser.add_argument("--quality-questions", type=int, default=200, help="questions of the quality section")
    parser.add_argument(
        "--quality-unscoped",
        type=int,
        default=200,
        help="of those, how many are asked again without cwd (default: all of the default 200)",
    )
    parser.add_argument("--modes", type=lambda v: v.split(","), help="HTTP modes to run (default: all)")
    parser.add_argument(
        "--embed-threads", type=int, help="SYNAPTO_EMBEDDING__THREADS for the server (default: the app's default)"
    )
    parser.add_argument(
        "--data-root", type=Path, default=DATA_ROOT, help="the folder of the data sets (default: %(default)s)"
    )
    parser.add_argument(
        "--server-dir",
        type=Path,
        help="serve the `app` of this source folder instead of this one's (another commit, measured in one sitting)",
    )
    parser.add_argument("--answers", type=Path, help="write the 1-client HTTP answers here")
    parser.add_argument(
        "--same-answers", type=Path, help="fail unless the 1-client HTTP answers equal those of this --answers file"
    )
    parser.add_argument(
        "--json", type=Path, help="default: bench/results/search-<N>.json (MiniLM), search-<N>-<model folder>.json"
    )
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="synapto-bench-search-") as tmp,
        open_dataset(args.thoughts, root=args.data_root, model=args.model) as dataset,
    ):
        results = asyncio.run(main_async(dataset, args, Path(tmp)))
    target = args.json or RESULTS / f"search-{dataset_dir(args.thoughts, args.model, args.data_root).name}.json"
    write_results(results, target)


if __name__ == "__main__":
    main()
