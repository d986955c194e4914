"""Benchmark: bulk_create of 10 000 short thoughts end to end vs raw embedding of the same texts.

    python -m bench.bulk_create            # what `make bench` runs: the default model (e5-small) and MiniLM
    python -m bench.bulk_create --count 3000 --transport dispatch --no-single-call --rounds 2
    python -m bench.bulk_create --model sentence-transformers/all-MiniLM-L6-v2-int8-dynamic   # one model
    python -m bench.bulk_create --reembed 5000   # time moving 5 000 MiniLM vectors to the default model

Raw embedding = FastEmbedEmbedder.embed_passages (the wrapper the service uses) on the same
texts, in this process. The service paths:

- `http`: a real `synaptomind serve` subprocess (uvicorn), called with the official MCP client
  over streamable HTTP with a bearer token — JSON-RPC, auth, validation, embedding, the INSERTs
  and the answer, as a remote agent sees it;
- `dispatch`: the same tool handler in this process through `app.mcp.dispatch.dispatch` (no
  HTTP), with the embedding time measured inside, so the database + service share is exact.

Each path stores the thoughts twice, each time into a fresh project that is deleted (and
vacuumed) afterwards, so every run starts from the same table:

- in calls of `--batch` (1000), each call paired with a raw embedding of the same 1000 texts
  just before it, so both halves of a pair see the same machine (robust on a shared machine);
- in one call of `--count` (10 000), compared with raw passes over all texts just before and
  just after it.

overhead = service time / raw embedding time − 1 (target ≤ 20 %). Each measurement waits until
other processes leave the CPUs idle (`--quiet`), up to `--max-wait` seconds.

Each `--model` (default: the default model, then MiniLM) is measured in turn, the order alternating over
`--rounds`, and each model's thoughts/s is printed against the last model's of the same round: on a shared
machine only such a ratio is worth comparing between runs.

Database: an embedded PostgreSQL in a temporary directory (deleted at the end), unless
SYNAPTO_DATABASE_URL is set. The models are the folders `make model` prepares.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.config import DEFAULT_CACHE_DIR, EmbeddingSettings
from app.db import migrations
from app.db.embedded import EmbeddedPostgres, tuned_server_settings
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.db.records import Principal
from app.embedding.backfill import backfill_once
from app.embedding.embedder import FastEmbedEmbedder, Vector
from app.embedding.profiles import OFFLINE_E5, OFFLINE_MINILM, PROFILES, ModelProfile, profile_for
from app.embedding.runtime import EmbeddingRuntime, prepared_dir
from app.mcp.dispatch import dispatch
from app.mcp.tools.catalog import ALL_SPECS
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from bench.common import cpu_times, free_port, machine, shipped_settings, wait_ready

TARGET_OVERHEAD = 0.20
DEFAULT_MODEL = EmbeddingSettings().model
CallTool = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]

# ---------------------------------------------------------------- dataset

# fmt: off
SUBJECTS = (
    "The auth service", "Our ingestion worker", "The billing API", "The search indexer", "The mobile client",
    "The nightly ETL job", "The GraphQL gateway", "The payments webhook handler", "The CI pipeline",
    "The notification service", "The feature-flag SDK", "The admin dashboard", "The export job",
    "The rate limiter", "The session store", "The image resizer", "The audit logger", "The scheduler",
    "The Kafka consumer group", "The embedding backfill", "The reverse proxy", "The data warehouse loader",
    "The onboarding flow", "The tenant provisioning script", "The metrics exporter", "The staging cluster",
)
ACTIONS = (
    "caches {thing} for {n} minutes {reason}",
    "retries {thing} with exponential backoff up to {n} times {reason}",
    "must validate {thing} before writing to {store} {reason}",
    "reads {thing} from {store} instead of the primary {reason}",
    "batches {thing} in groups of {n} {reason}",
    "drops {thing} older than {n} days {reason}",
    "was migrated from {store} to {store2} {reason}",
    "times out after {n} seconds when {store} is slow, so we added a circuit breaker",
    "leaks {thing} under load; a fix is pending in PR #{n}",
    "should never log {thing}; we mask them at the formatter {reason}",
    "depends on {thing} being present in {store} at startup",
    "emits one event per {thing} into {store} {reason}",
    "locks {thing} with a PostgreSQL advisory lock {reason}",
    "shards {thing} by tenant id across {n} partitions {reason}",
    "keeps {thing} in memory, which costs about {n} MB per replica",
)
THINGS = (
    "JWT signing keys", "tenant quotas", "feature flags", "invoice PDFs", "user avatars", "idempotency keys",
    "webhook payloads", "search synonyms", "OAuth refresh tokens", "price tables", "audit events",
    "session cookies", "embedding vectors", "CSV exports", "schema migrations", "retry budgets",
    "connection strings", "cron schedules", "Slack alerts", "geo-IP lookups", "currency rates",
    "password reset links", "build artifacts", "customer notes", "SLA timers", "API rate counters",
)
STORES = (
    "PostgreSQL", "Redis", "S3", "Kafka", "Elasticsearch", "SQLite", "BigQuery", "DynamoDB", "RabbitMQ",
    "the local disk", "Memcached", "ClickHouse",
)
REASONS = (
    "to cut p99 latency", "because the upstream rate-limits us", "after the incident of {date}",
    "(see ADR-{n2})", "per the security review", "to stay under the free tier",
    "since release {major}.{minor}",
    "until the vendor fixes their API", "as agreed with the data team", "for GDPR deletion requests",
)
TAGS = ("architecture", "decision", "bug", "ops", "security", "performance", "todo", "data", "api", "infra")
# fmt: on


def generate_thoughts(count: int, seed: int = 20261130) -> list[dict[str, Any]]:
    """`count` distinct, realistic short thoughts (60–200 characters), the same ones on every run."""
    rng = random.Random(seed)
    seen: set[str] = set()
    thoughts: list[dict[str, Any]] = []
    while len(thoughts) < count:
        store, store2 = rng.sample(STORES, 2)
        reason = rng.choice(REASONS).format(
            date=f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            n2=rng.randint(1, 400),
            major=rng.randint(1, 9),
            minor=rng.randint(0, 30),
        )
        action = rng.choice(ACTIONS).format(
            thing=rng.choice(THINGS), n=rng.randint(2, 500), store=store, store2=store2, reason=reason
        )
        content = f"{rng.choice(SUBJECTS)} {action}."
        if content in seen:
            continue
        seen.add(content)
        tags = rng.sample(TAGS, rng.randint(0, 3))
        thoughts.append({"content": content, "tags": tags} if tags else {"content": content})
    return thoughts


# ---------------------------------------------------------------- measurement


class TimedEmbedder:
    """Delegates to the real embedder and adds up the time spent embedding (dispatch path only)."""

    def __init__(self, inner: FastEmbedEmbedder) -> None:
        self.inner = inner
        self.profile: ModelProfile = inner.profile
        self.seconds = 0.0

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        started = time.perf_counter()
        try:
            return await self.inner.embed_passages(texts)
        finally:
            self.seconds += time.perf_counter() - started

    async def embed_query(self, text_: str) -> Vector:
        return await self.inner.embed_query(text_)


@dataclass
class Run:
    transport: str
    batch: int
    count: int
    seconds: float  # the bulk_create calls, end to end
    raw_seconds: float  # raw embedding of the same texts (paired, or the neighbouring passes)
    embed_seconds: float | None = None  # embedding measured inside the service (dispatch only)
    call_seconds: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0  # CPU of the calls: this process and its descendants (PostgreSQL, the http server)

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    @property
    def overhead(self) -> float:
        return self.seconds / self.raw_seconds - 1

    @property
    def in_service(self) -> float | None:
        """Non-embedding time inside the service / the embedding time inside it."""
        return (self.seconds - self.embed_seconds) / self.embed_seconds if self.embed_seconds else None


# Benchmark-only: the e5 build's previous file (4-bit MatMulNBits, `offline_e5.build(products="q4")`, which an
# older prepare-model left in the folder), served in process (`--transport dispatch`) to compare the kernels.
E5_4BIT = f"{OFFLINE_E5}-4bit-kernel"


def load_embedder(model_id: str, cache_dir: Path, batch_size: int | None) -> FastEmbedEmbedder:
    """The model's prepared folder (`make model`), loaded as the service loads it."""
    if model_id == E5_4BIT and E5_4BIT not in PROFILES:
        PROFILES[E5_4BIT] = dataclasses.replace(PROFILES[OFFLINE_E5], model_id=E5_4BIT, model_file="model_q4.onnx")
    profile = profile_for(model_id)
    return FastEmbedEmbedder.load(profile, prepared_dir(profile, cache_dir), cache_dir, None, batch_size)


async def raw_embedding(embedder: FastEmbedEmbedder, texts: list[str]) -> float:
    """Seconds to embed every text through the same wrapper the service uses."""
    started = time.perf_counter()
    vectors = await embedder.embed_passages(texts)
    elapsed = time.perf_counter() - started
    assert len(vectors) == len(texts)
    return elapsed


async def store_all(
    call: CallTool,
    thoughts: list[dict[str, Any]],
    batch: int,
    cwd: str,
    paired: FastEmbedEmbedder | None = None,
) -> tuple[list[float], float]:
    """bulk_create in calls of `batch`: each call's seconds, and (with `paired`) the seconds of the
    raw embeddings of each call's texts, run just before it. Refuses to count a partial write."""
    durations: list[float] = []
    raw = 0.0
    for start in range(0, len(thoughts), batch):
        chunk = thoughts[start : start + batch]
        if paired is not None:
            raw += await raw_embedding(paired, [thought["content"] for thought in chunk])
        started, cpu_started = time.perf_counter(), tree_cpu_seconds()
        result = await call("memory_store", {"action": "bulk_create", "thoughts": chunk, "cwd": cwd})
        durations.append(time.perf_counter() - started)
        CPU_SPENT[0] += tree_cpu_seconds() - cpu_started
        counts = result["meta"]["counts"]
        if counts.get("created") != len(chunk) or counts.get("failed") != 0:
            raise SystemExit(f"bulk_create stored {counts} of {len(chunk)} thoughts; the run is invalid")
    return durations, raw


# CPU seconds the calls took, this process and its descendants (the embedded PostgreSQL, the http server)
CPU_SPENT = [0.0]


def tree_cpu_seconds() -> float:
    """User + system CPU of this process and every live descendant: on a shared machine, CPU per thought moves
    less with the others' load than the wall time does."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for process in (me, *me.children(recursive=True)):
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


class Bench:
    def __init__(self, url: str, thoughts: list[dict[str, Any]], model_id: str) -> None:
        self.url = url
        self.thoughts = thoughts
        self.model_id = model_id
        self.engine = create_async_engine(url, poolclass=NullPool)

    async def principal(self) -> tuple[str, Principal]:
        db = Database(build_engine(self.url, pool_size=1))
        try:
            async with db.unit_of_work() as session:
                return await AuthService(session).create_token(f"bench-{uuid.uuid4().hex[:8]}", Role.writer)
        finally:
            await db.dispose()

    async def run(
        self, transport: str, call: CallTool, batch: int, paired: FastEmbedEmbedder | None = None
    ) -> tuple[list[float], float]:
        """One measured pass into a fresh project, then the project and its rows are removed."""
        cwd = f"/bench/{transport}/{batch}/{uuid.uuid4().hex[:8]}"
        await call("memory_manage", {"action": "create", "name": cwd, "local_path": cwd})
        measured = await store_all(call, self.thoughts, batch, cwd, paired)
        await self.verify_and_drop(cwd)
        return measured

    async def verify_and_drop(self, cwd: str) -> None:
        async with self.engine.begin() as connection:
            project = (
                await connection.execute(text("SELECT id FROM project WHERE local_path = :p"), {"p": cwd})
            ).scalar_one()
            embedded = (
                await connection.execute(
                    text("SELECT count(*) FROM thought WHERE project_id = :p AND embedding_model = :m"),
                    {"p": project, "m": self.model_id},
                )
            ).scalar_one()
            if embedded != len(self.thoughts):
                invalid = f"{embedded} of {len(self.thoughts)} thoughts carry a vector; the run is invalid"
                raise SystemExit(invalid)
            await connection.execute(text("DELETE FROM thought WHERE project_id = :p"), {"p": project})
            await connection.execute(text("DELETE FROM project WHERE id = :p"), {"p": project})
        async with self.engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text("VACUUM (ANALYZE) thought"))

    async def drop_user(self, name: str) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(text("DELETE FROM app_user WHERE name = :n"), {"n": name})

    async def close(self) -> None:
        await self.engine.dispose()


def _payload(result: Any) -> dict[str, Any]:
    if result.is_error:
        detail = "".join(getattr(block, "text", "") for block in result.content)
        raise SystemExit(f"tool call failed: {detail[:500]}")
    payload: dict[str, Any] = result.structured_content["result"]
    return payload


# ---------------------------------------------------------------- transports


@asynccontextmanager
async def dispatch_transport(
    url: str, principal: Principal, embedder: FastEmbedEmbedder
) -> AsyncIterator[tuple[CallTool, TimedEmbedder]]:
    timed = TimedEmbedder(embedder)
    runtime = EmbeddingRuntime(EmbeddingSettings(model=embedder.profile.model_id, cache_dir=DEFAULT_CACHE_DIR))
    runtime.use(timed)
    shipped = shipped_settings()
    db = Database(build_engine(url, shipped.pool_size))
    context = AppContext(db, runtime, shipped)
    specs = {spec.name: spec for spec in ALL_SPECS}

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return _payload(await dispatch(specs[tool], arguments, context, principal))

    try:
        yield call, timed
    finally:
        await db.dispose()


def _start_server(port: int, env: dict[str, str], log_file: Path) -> subprocess.Popen[bytes]:
    """`synaptomind serve` exactly as a deployment starts it (its log goes to `log_file`)."""
    with log_file.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


@asynccontextmanager
async def http_transport(
    url: str, token: str, model_id: str, cache_dir: Path, work_dir: Path
) -> AsyncIterator[CallTool]:
    """`synaptomind serve` in a subprocess, called with the MCP SDK client and a bearer token."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    port = free_port()
    env = {
        **os.environ,
        "SYNAPTO_DATABASE_URL": url,
        "SYNAPTO_DATA_DIR": str(work_dir / "data"),
        "SYNAPTO_EMBEDDING__MODEL": model_id,
        "SYNAPTO_EMBEDDING__CACHE_DIR": str(cache_dir),
        "SYNAPTO_LOG_LEVEL": "WARNING",
    }
    server = _start_server(port, env, work_dir / "server.log")
    base = f"http://127.0.0.1:{port}"
    try:
        await asyncio.to_thread(wait_ready, base, server)
        timeout = httpx2.Timeout(30, read=900)
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
        ):

            async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                return _payload(await client.call_tool(tool, arguments))

            yield call
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


# ---------------------------------------------------------------- main


def _busy_share(seconds: float) -> float | None:
    before = cpu_times()
    time.sleep(seconds)
    after = cpu_times()
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


async def wait_for_quiet(threshold: float, max_wait: float) -> None:
    """Start a measurement only when other processes leave the CPUs idle (a shared machine is noisy)."""
    if threshold >= 1:
        return
    deadline = time.monotonic() + max_wait
    announced = False
    while True:
        share = await asyncio.to_thread(_busy_share, 1.0)
        if share is None or share <= threshold:
            return
        if time.monotonic() > deadline:
            print(f"  (still {share:.0%} CPU busy after {max_wait:.0f}s; measuring anyway)")
            return
        if not announced:
            print(f"  waiting for a quiet machine ({share:.0%} CPU busy)")
            announced = True


async def server_version(url: str) -> str:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            pg = (await connection.execute(text("SHOW server_version"))).scalar_one()
            vector = (
                await connection.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
            ).scalar_one()
        return f"PostgreSQL {pg} + pgvector {vector}"
    finally:
        await engine.dispose()


def report(runs: list[Run], raw_passes: list[float], count: int) -> dict[str, Any]:
    print(f"\nraw embedding passes over all {count} texts: " + ", ".join(f"{s:.1f}s" for s in raw_passes))
    print(
        f"{'path':<9}{'calls':>12}{'seconds':>9}{'thoughts/s':>12}{'raw s':>8}{'raw/s':>8}"
        f"{'overhead':>10}{'in-service':>12}{'CPU ms':>9}"
    )
    rows = []
    for run in runs:
        inside = run.in_service
        print(
            f"{run.transport:<9}{f'{count // run.batch} × {run.batch}':>12}{run.seconds:>9.1f}{run.rate:>12.1f}"
            f"{run.raw_seconds:>8.1f}{count / run.raw_seconds:>8.1f}{run.overhead:>10.1%}"
            f"{'–' if inside is None else format(inside, '.1%'):>12}{1000 * run.cpu_seconds / count:>9.2f}"
            + ("" if run.overhead <= TARGET_OVERHEAD else "  over target")
        )
        rows.append(
            {
                "transport": run.transport,
                "batch": run.batch,
                "seconds": round(run.seconds, 2),
                "thoughts_per_second": round(run.rate, 1),
                "raw_seconds": round(run.raw_seconds, 2),
                "raw_thoughts_per_second": round(count / run.raw_seconds, 1),
                "overhead": round(run.overhead, 4),
                "embed_seconds_in_service": None if run.embed_seconds is None else round(run.embed_seconds, 2),
                "in_service_overhead": None if inside is None else round(inside, 4),
                "slowest_call_seconds": round(max(run.call_seconds), 2),
                "cpu_ms_per_thought": round(1000 * run.cpu_seconds / count, 2),
            }
        )
    print(
        "overhead = service time / raw embedding time of the same texts − 1 (batched calls: each paired\n"
        "with a raw embedding of its texts; one call: the mean of the raw passes before and after it);\n"
        "in-service = (dispatch time − embedding time measured inside it) / that embedding time;\n"
        "CPU ms = CPU per thought stored, this process and its descendants (PostgreSQL, the http server)"
    )
    return {"raw_passes": [round(s, 2) for s in raw_passes], "runs": rows}


async def measure_model(
    args: argparse.Namespace, url: str, work_dir: Path, model_id: str, thoughts: list[dict[str, Any]]
) -> dict[str, Any]:
    """Every path of one model: raw passes, dispatch and http runs, as `report` prints them."""
    texts = [thought["content"] for thought in thoughts]
    print(f"\n== {model_id}; load average {os.getloadavg()[0]:.2f}")
    embedder = load_embedder(model_id, args.cache_dir, EmbeddingSettings().batch_size)
    await embedder.embed_passages(texts[:256])  # warm-up
    bench = Bench(url, thoughts, model_id)
    token, principal = await bench.principal()
    raw_passes: list[float] = []
    runs: list[Run] = []

    async def quiet() -> None:
        await wait_for_quiet(args.quiet, args.max_wait)

    async def raw_pass() -> float:
        await quiet()
        raw_passes.append(await raw_embedding(embedder, texts))
        print(f"raw embedding of all texts: {raw_passes[-1]:.2f}s")
        return raw_passes[-1]

    async def measure(transport: str, call: CallTool, timed: TimedEmbedder | None) -> None:
        for batch in args.batches:
            single = batch >= args.count
            before = await raw_pass() if single else 0.0
            await quiet()
            if timed is not None:
                timed.seconds = 0.0
            CPU_SPENT[0] = 0.0
            durations, raw = await bench.run(transport, call, batch, paired=None if single else embedder)
            cpu = CPU_SPENT[0]
            if single:
                raw = (before + await raw_pass()) / 2
            run = Run(transport, batch, args.count, sum(durations), raw, call_seconds=durations, cpu_seconds=cpu)
            run.embed_seconds = timed.seconds if timed is not None else None
            runs.append(run)
            print(f"{transport} {count_calls(args.count, batch)}: {run.seconds:.2f}s, raw {raw:.2f}s")

    try:
        if args.transport in ("dispatch", "both"):
            async with dispatch_transport(url, principal, embedder) as (call, timed):
                await store_all(call, generate_thoughts(64, seed=1), 64, "/bench/warm-up")
                await measure("dispatch", call, timed)
        if args.transport in ("http", "both"):
            async with http_transport(url, token, model_id, args.cache_dir, work_dir) as call:
                await store_all(call, generate_thoughts(64, seed=1), 64, "/bench/warm-up")
                await measure("http", call, None)
    finally:
        await bench.drop_user(principal.name)
        await bench.close()
    return {"model": model_id, **report(runs, raw_passes, args.count)}


async def main_async(args: argparse.Namespace, url: str, work_dir: Path) -> dict[str, Any]:
    thoughts = generate_thoughts(args.count)
    lengths = [len(thought["content"]) for thought in thoughts]
    print(
        f"{len(thoughts)} distinct thoughts, {min(lengths)}–{max(lengths)} characters "
        f"(mean {statistics.mean(lengths):.0f}), {sum(1 for t in thoughts if 'tags' in t)} tagged"
    )
    print(f"machine: {machine()}; database: {await server_version(url)}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    # Each model once per round, the order alternating: on a shared machine only the ratio of two models
    # measured in the same sitting means much.
    models: list[dict[str, Any]] = []
    for round_index in range(args.rounds):
        order = args.model if round_index % 2 == 0 else list(reversed(args.model))
        for model_id in order:
            models.append({"round": round_index + 1, **await measure_model(args, url, work_dir, model_id, thoughts)})
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    if len(args.model) > 1:
        print_ratios(models, args.model[-1])
    return {"models": models}


def print_ratios(models: list[dict[str, Any]], first: str) -> None:
    """Each model's thoughts/s against the first model's in the same round, path by path."""
    print(f"\nthoughts/s relative to {first}, same round:")
    for result in models:
        if result["model"] == first:
            continue
        base = next(m for m in models if m["model"] == first and m["round"] == result["round"])
        for row, base_row in zip(result["runs"], base["runs"], strict=True):
            ratio = row["thoughts_per_second"] / base_row["thoughts_per_second"]
            cpu_ratio = row["cpu_ms_per_thought"] / base_row["cpu_ms_per_thought"]
            print(
                f"  round {result['round']} {result['model']} {row['transport']} × {row['batch']}: "
                f"{row['thoughts_per_second']:.1f} / {base_row['thoughts_per_second']:.1f} = {ratio:.2f}; "
                f"CPU per thought {row['cpu_ms_per_thought']:.2f} / {base_row['cpu_ms_per_thought']:.2f} ms "
                f"= {cpu_ratio:.2f}×"
            )


async def measure_reembed(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """`--reembed N`: N thoughts stored with the last --model (MiniLM by default), then moved to the first (the
    default) as `synaptomind reembed` and the background backfill move them: batches of 256 through backfill_once."""
    source, target = args.model[-1], args.model[0]
    thoughts = generate_thoughts(args.reembed, seed=7)
    bench = Bench(url, thoughts, target)
    _, principal = await bench.principal()
    try:
        async with dispatch_transport(url, principal, load_embedder(source, args.cache_dir, None)) as (call, _):
            cwd = f"/bench/reembed/{uuid.uuid4().hex[:8]}"
            await call("memory_manage", {"action": "create", "name": cwd, "local_path": cwd})
            await store_all(call, thoughts, args.batch, cwd)
        runtime = EmbeddingRuntime(EmbeddingSettings(model=target, cache_dir=args.cache_dir))
        await runtime.load()
        if runtime.state != "ready":
            raise SystemExit(f"{target} not loadable: {runtime.note}")
        db = Database(build_engine(url, 2))
        await wait_for_quiet(args.quiet, args.max_wait)
        print(f"re-embedding {len(thoughts)} thoughts {source} → {target}; load {os.getloadavg()[0]:.2f}")
        started, cpu_started = time.perf_counter(), time.process_time()
        moved = 0
        while (done := await backfill_once(db, runtime, 256, include_other_models=True)) > 0:
            moved += done
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        await db.dispose()
        await bench.verify_and_drop(cwd)
    finally:
        await bench.drop_user(principal.name)
        await bench.close()
    rate = moved / seconds
    print(
        f"reembed: {moved} thoughts in {seconds:.1f}s ({rate:.1f}/s; this process's CPU {cpu:.1f}s); load at end "
        f"{os.getloadavg()[0]:.2f}; 100 000 thoughts at this rate: {100_000 / rate / 60:.0f} min"
    )
    return {"reembed": {"from": source, "to": target, "thoughts": moved, "seconds": round(seconds, 1)}}


def count_calls(count: int, batch: int) -> str:
    return f"{-(-count // batch)} × {min(batch, count)}"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument(
        "--single-call",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also store all --count thoughts in one call (default on)",
    )
    parser.add_argument(
        "--model",
        action="append",
        help=f"a prepared model to measure (repeat for several, alternated per round; default: {DEFAULT_MODEL} "
        f"and {OFFLINE_MINILM})",
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds over the models (order alternating)")
    parser.add_argument(
        "--reembed",
        type=int,
        metavar="N",
        help="instead: store N thoughts with the last --model, time moving them to the first (as reembed does)",
    )
    parser.add_argument("--transport", choices=("http", "dispatch", "both"), default="both")
    cache_dir = Path(os.environ.get("SYNAPTO_EMBEDDING__CACHE_DIR", DEFAULT_CACHE_DIR))
    parser.add_argument("--cache-dir", type=Path, default=cache_dir)
    parser.add_argument(
        "--quiet",
        type=float,
        default=0.15,
        help="start each measurement only when the machine's CPUs are at most this busy (1 = never wait)",
    )
    parser.add_argument("--max-wait", type=float, default=300, help="seconds to wait for a quiet machine")
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="scheduling priority for the benchmark and the processes it starts (negative needs root)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    args.model = args.model or [DEFAULT_MODEL, OFFLINE_MINILM]
    args.batches = [args.batch, args.count] if args.single_call and args.batch < args.count else [args.batch]
    signal.signal(signal.SIGTERM, _interrupt)  # stop the server and the embedded PostgreSQL on the way out
    if args.nice:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)  # before any thread or child exists: all inherit it
    with tempfile.TemporaryDirectory(prefix="synapto-bench-") as tmp:
        work_dir = Path(tmp)
        embedded = None
        url = os.environ.get("SYNAPTO_DATABASE_URL")
        if not url:
            embedded = EmbeddedPostgres(work_dir / "pg", delete_on_stop=True, server_settings=tuned_server_settings())
            url = embedded.start()
        try:
            migrations.upgrade(url)
            work = measure_reembed(args, url) if args.reembed else main_async(args, url, work_dir)
            results = asyncio.run(work)
        finally:
            if embedded is not None:
                embedded.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
