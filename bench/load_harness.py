"""The load harness's parts: the MCP client, the workers and their mix, the servers, seeding, the invariant checks
and the report; run by the CLI (bench/load.py) and the fault checks (bench/faults.py)."""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from app.config import DEFAULT_CACHE_DIR
from app.db import migrations
from app.db.embedded import EmbeddedPostgres, tuned_server_settings
from app.db.models import Role
from app.services.auth.tokens import AuthService
from bench.common import free_port, machine
from bench.dataset import served_default_model

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CALL_TIMEOUT = 60.0  # one call, whatever happens
PRIMER_THRESHOLD = 5  # the server default (settings primer.promote_threshold)
PROJECTS = 3

# action → weight (per cent of calls)
MIX: dict[str, int] = {
    "search": 40,
    "create": 15,
    "bulk_create": 5,
    "link": 10,
    "link_batch": 5,
    "get": 5,
    "list": 5,
    "archive": 5,
    "unlink": 3,
    "reflect": 2,
    "context": 5,
}
EDGE_TYPES = ("related", "supports", "references", "depends_on", "develops", "contradicts")

# fmt: off
SUBJECTS = (
    "The auth service", "The ingestion worker", "The billing API", "The search indexer", "The mobile client",
    "The nightly ETL job", "The GraphQL gateway", "The webhook handler", "The CI pipeline", "The scheduler",
    "The notification service", "The admin dashboard", "The export job", "The rate limiter", "The session store",
)
VERBS = (
    "caches", "retries", "validates", "batches", "drops", "migrates", "shards", "locks", "emits", "reads",
    "compresses", "encrypts", "deduplicates", "streams", "archives",
)
THINGS = (
    "JWT signing keys", "tenant quotas", "feature flags", "invoice PDFs", "user avatars", "idempotency keys",
    "webhook payloads", "search synonyms", "refresh tokens", "price tables", "audit events", "session cookies",
    "embedding vectors", "CSV exports", "schema migrations", "retry budgets", "cron schedules", "currency rates",
)
REASONS = (
    "to cut p99 latency", "because the upstream rate-limits us", "per the security review", "for GDPR requests",
    "to stay under the free tier", "until the vendor fixes their API", "as agreed with the data team",
)
TAGS = ("architecture", "decision", "bug", "ops", "security", "performance", "todo", "data", "api", "infra")
# fmt: on


def project_path(index: int) -> str:
    return f"/srv/load/p{index}"


# ---------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    """One call as the client saw it."""

    action: str
    status: str  # ok | 400 | 403 | 404 | 409 | 503 | http-<code> | unclassified | transport | timeout
    started: float  # monotonic
    elapsed: float
    result: Any = None  # structuredContent.result of an envelope
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def classified(self) -> bool:
        """An envelope with a status code, or the HTTP layer's retryable 503 (database down at the token check).

        Every client holds a valid token, so an HTTP 401 is a failure here too (an outage taken for a bad token).
        """
        return self.status not in ("unclassified", "transport", "timeout") and (
            not self.status.startswith("http-") or self.status == "http-503"
        )

    @property
    def retryable_unavailable(self) -> bool:
        return self.status in ("503", "http-503")


def classify_result(result: Any) -> tuple[str, Any]:
    """(status, structured result) of a CallToolResult."""
    structured = result.structured_content
    payload = structured.get("result") if isinstance(structured, dict) else None
    if not result.is_error:
        return "ok", payload
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and isinstance(error.get("statusCode"), int):
        status = int(error["statusCode"])
        return ("unclassified" if status >= 500 and status != 503 else str(status)), payload
    return "unclassified", payload


class McpClient:
    """One MCP session over streamable HTTP with a bearer token; reconnects after a transport failure."""

    def __init__(self, url: str, token: str, call_timeout: float = CALL_TIMEOUT) -> None:
        self.url = url
        self.token = token
        self.call_timeout = call_timeout
        self.last_http_status: int | None = None
        self._session: ClientSession | None = None

    async def _on_response(self, response: httpx2.Response) -> None:
        self.last_http_status = response.status_code

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[McpClient]:
        timeout = httpx2.Timeout(self.call_timeout, connect=5)
        async with (
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=timeout,
                event_hooks={"response": [self._on_response]},
            ) as http,
            streamable_http_client(self.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            async with asyncio.timeout(self.call_timeout):
                await session.initialize()
            self._session = session
            try:
                yield self
            finally:
                self._session = None

    async def call(self, action: str, tool: str, arguments: dict[str, Any]) -> Outcome:
        assert self._session is not None, "call() outside connect()"
        self.last_http_status = None
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.call_timeout):
                result = await self._session.call_tool(tool, arguments)
        except TimeoutError:
            return Outcome(action, "timeout", started, time.monotonic() - started)
        except Exception as error:  # a JSON-RPC error (non-2xx answer) or a transport failure
            status = self.last_http_status
            label = f"http-{status}" if status is not None and status >= 400 else "transport"
            return Outcome(action, label, started, time.monotonic() - started, detail=_describe(error))
        status, payload = classify_result(result)
        detail = "".join(getattr(block, "text", "") for block in result.content)[:300] if status != "ok" else ""
        return Outcome(action, status, started, time.monotonic() - started, payload, detail)


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        return _describe(error.exceptions[0])
    return f"{type(error).__name__}: {error}"[:300]


# ---------------------------------------------------------------- what was acknowledged


@dataclass
class BulkCall:
    tag: str
    rows: int
    acknowledged: bool
    ids: list[str] = field(default_factory=list)


@dataclass
class Ledger:
    """Every acknowledged write (and the writes whose outcome the client could not know)."""

    thoughts: set[str] = field(default_factory=set)
    archived: set[str] = field(default_factory=set)
    archive_uncertain: set[str] = field(default_factory=set)
    bulk_calls: list[BulkCall] = field(default_factory=list)
    edges: dict[str, tuple[str, str]] = field(default_factory=dict)
    edges_deleted: dict[str, tuple[str, str]] = field(default_factory=dict)
    unlink_uncertain: dict[str, tuple[str, str]] = field(default_factory=dict)
    batch_pairs: list[tuple[str, str]] = field(default_factory=list)
    read_hits: collections.Counter[str] = field(default_factory=collections.Counter)
    reflect_created: int = 0
    uncertain_writes: int = 0
    # shared pools the clients pick from (a team works on the same thoughts)
    live: list[str] = field(default_factory=list)
    edge_pool: list[str] = field(default_factory=list)

    def add_thought(self, thought_id: str) -> None:
        if thought_id not in self.thoughts:
            self.thoughts.add(thought_id)
            self.live.append(thought_id)

    def pick_live(self, rng: random.Random, count: int = 1) -> list[str]:
        if len(self.live) < count:
            return []
        return rng.sample(self.live[-2000:], count) if len(self.live) > 2000 else rng.sample(self.live, count)

    def counts(self) -> dict[str, int]:
        return {
            "thoughts": len(self.thoughts),
            "archived": len(self.archived),
            "bulk_calls": sum(1 for call in self.bulk_calls if call.acknowledged),
            "edges": len(self.edges),
            "edges_deleted": len(self.edges_deleted),
            "link_batch_pairs": len(self.batch_pairs),
            "reflect_thoughts": self.reflect_created,
            "writes_with_unknown_outcome": self.uncertain_writes,
        }


def thought_ids_in(payload: Any) -> set[str]:
    """Ids of every thought an answer shows (dicts carrying both `id` and `content`)."""
    found: set[str] = set()
    stack = [payload]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("id"), str) and "content" in value:
                found.add(value["id"])
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


# ---------------------------------------------------------------- the workload


class Worker:
    """One agent: its own token and session, the mix, one call at a time."""

    def __init__(self, index: int, client: McpClient, ledger: Ledger, rng: random.Random) -> None:
        self.index = index
        self.client = client
        self.ledger = ledger
        self.rng = rng
        self.counter = 0
        self.outcomes: list[Outcome] = []

    # ---- content

    def _content(self) -> str:
        rng = self.rng
        self.counter += 1
        return (
            f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(REASONS)} "
            f"(agent {self.index}, note {self.counter}, {rng.randrange(10**6):06d})."
        )

    def _query(self) -> str:
        rng = self.rng
        return " ".join(
            rng.sample([*rng.sample(THINGS, 2), rng.choice(VERBS), rng.choice(SUBJECTS)], rng.randint(1, 3))
        )

    def _cwd(self) -> dict[str, str]:
        roll = self.rng.random()
        return {} if roll < 0.2 else {"cwd": project_path(self.rng.randrange(PROJECTS))}

    def _tags(self) -> list[str]:
        return self.rng.sample(TAGS, self.rng.randint(0, 2))

    # ---- one step

    async def step(self) -> None:
        action = self.rng.choices(list(MIX), weights=list(MIX.values()))[0]
        if action in ("link", "get", "context", "archive") and not self.ledger.live:
            action = "create"
        if action == "unlink" and not self.ledger.edge_pool:
            action = "link"
        await getattr(self, f"_do_{action}")()

    async def _call(self, action: str, tool: str, arguments: dict[str, Any]) -> Outcome:
        outcome = await self.client.call(action, tool, arguments)
        self.outcomes.append(outcome)
        if outcome.retryable_unavailable:
            await asyncio.sleep(0.1 + 0.1 * self.rng.random())  # back off like a well-behaved client
        return outcome

    def _read(self, outcome: Outcome) -> None:
        if outcome.ok:
            for thought_id in thought_ids_in(outcome.result):
                self.ledger.read_hits[thought_id] += 1

    def _unknown(self, outcome: Outcome) -> bool:
        """A write whose outcome the client cannot know (no envelope came back)."""
        unknown = not outcome.ok and not outcome.status.isdigit()
        if unknown:
            self.ledger.uncertain_writes += 1
        return unknown

    async def _do_search(self) -> None:
        args: dict[str, Any] = {"action": "search", "query": self._query(), **self._cwd()}
        if self.rng.random() < 0.3:
            args["limit"] = self.rng.choice((5, 20))
        self._read(await self._call("search", "memory_recall", args))

    async def _do_create(self) -> None:
        args: dict[str, Any] = {"action": "create", "content": self._content(), **self._cwd()}
        tags = self._tags()
        if tags:
            args["tags"] = tags
        outcome = await self._call("create", "memory_store", args)
        if outcome.ok:
            self.ledger.add_thought(outcome.result["item"]["id"])
        else:
            self._unknown(outcome)

    async def _do_bulk_create(self) -> None:
        rows = self.rng.randint(10, 50)
        tag = f"batch-a{self.index}-{self.counter}-{self.rng.randrange(10**6)}"
        thoughts = [{"content": self._content(), "tags": [tag, *self._tags()]} for _ in range(rows)]
        outcome = await self._call("bulk_create", "memory_store", {"action": "bulk_create", "thoughts": thoughts})
        call = BulkCall(tag, rows, outcome.ok)
        if outcome.ok:
            for item in outcome.result["items"]:
                if item["status"] == "created":
                    call.ids.append(item["thought"]["id"])
                    self.ledger.add_thought(item["thought"]["id"])
        else:
            self._unknown(outcome)
        self.ledger.bulk_calls.append(call)

    async def _do_link(self) -> None:
        pair = self.ledger.pick_live(self.rng, 2)
        if not pair:
            return await self._do_create()
        edge_type = self.rng.choice(EDGE_TYPES)
        args = {"action": "link", "source_id": pair[0], "target_id": pair[1], "edge_type": edge_type}
        outcome = await self._call("link", "memory_store", args)
        if outcome.ok:
            edge = outcome.result["item"]
            if edge["id"] not in self.ledger.edges:
                self.ledger.edges[edge["id"]] = (edge["source_id"], edge["target_id"])
                self.ledger.edge_pool.append(edge["id"])
        else:
            self._unknown(outcome)
        return None

    async def _do_link_batch(self) -> None:
        links = []
        for _ in range(self.rng.randint(2, 20)):
            pair = self.ledger.pick_live(self.rng, 2)
            if pair:
                links.append({"source": pair[0], "target": pair[1], "type": self.rng.choice(EDGE_TYPES)})
        if not links:
            return await self._do_create()
        outcome = await self._call("link_batch", "memory_store", {"action": "link_batch", "links": links})
        if outcome.ok:
            for item in outcome.result["items"]:
                if item["status"] == "linked":
                    self.ledger.batch_pairs.append((item["source"], item["target"]))
        else:
            self._unknown(outcome)
        return None

    async def _do_get(self) -> None:
        [thought_id] = self.ledger.pick_live(self.rng, 1)
        args = {"action": "get", "thought_id": thought_id, "include_edges": self.rng.random() < 0.3}
        self._read(await self._call("get", "memory_recall", args))

    async def _do_list(self) -> None:
        args = {"action": "list", "limit": self.rng.choice((10, 20, 50)), **self._cwd()}
        self._read(await self._call("list", "memory_recall", args))

    async def _do_context(self) -> None:
        if self.rng.random() < 0.5:
            args: dict[str, Any] = {"action": "context", "query": self._query(), **self._cwd()}
        else:
            args = {"action": "context", "thought_id": self.ledger.pick_live(self.rng, 1)[0]}
        self._read(await self._call("context", "memory_recall", args))

    async def _do_archive(self) -> None:
        [thought_id] = self.ledger.pick_live(self.rng, 1)
        preview = await self._call(
            "archive.preview", "memory_supersede", {"action": "archive", "thought_id": thought_id}
        )
        if not preview.ok or preview.result["item"].get("outcome") != "would_archive":
            return
        token = preview.result["item"]["preview_token"]
        args = {"action": "archive", "thought_id": thought_id, "confirm": True, "preview_token": token}
        confirm = await self._call("archive.confirm", "memory_supersede", args)
        if confirm.ok:
            self.ledger.archived.add(thought_id)
            with contextlib.suppress(ValueError):
                self.ledger.live.remove(thought_id)
        elif self._unknown(confirm):
            self.ledger.archive_uncertain.add(thought_id)

    async def _do_unlink(self) -> None:
        edge_id = self.rng.choice(self.ledger.edge_pool)
        preview = await self._call("unlink.preview", "memory_store", {"action": "unlink", "edge_id": edge_id})
        if not preview.ok or preview.result["item"].get("status") != "preview":
            return
        edge = preview.result["item"]["edge"]
        token = preview.result["item"]["preview_token"]
        args = {"action": "unlink", "edge_id": edge_id, "confirm": True, "preview_token": token}
        confirm = await self._call("unlink.confirm", "memory_store", args)
        if confirm.ok and confirm.result["item"]["status"] == "deleted":
            self.ledger.edges_deleted[edge_id] = (edge["source_id"], edge["target_id"])
            with contextlib.suppress(ValueError):
                self.ledger.edge_pool.remove(edge_id)
        elif self._unknown(confirm):
            self.ledger.unlink_uncertain[edge_id] = (edge["source_id"], edge["target_id"])

    async def _do_reflect(self) -> None:
        args: dict[str, Any] = {
            "action": "reflect",
            "summary": f"Agent {self.index} session {self.counter}: worked on {self.rng.choice(THINGS)}.",
            "decisions": [f"Decision {self.index}-{self.counter}-{self.rng.randrange(10**6)}: {self._content()}"],
            "pending": [f"Follow-up {self.index}-{self.counter}-{self.rng.randrange(10**6)}: {self._content()}"],
            **self._cwd(),
        }
        outcome = await self._call("reflect", "memory_reflect", args)
        if outcome.ok:
            item = outcome.result["item"]
            self.ledger.reflect_created += int(item.get("decisions_created", 0)) + int(item.get("pending_created", 0))
        else:
            self._unknown(outcome)


async def run_worker(worker: Worker, deadline: float, max_calls: int, stop: asyncio.Event) -> None:
    """Calls until the deadline, the call budget or `stop`; reconnects (bounded) after a transport failure."""
    while time.monotonic() < deadline and len(worker.outcomes) < max_calls and not stop.is_set():
        before = len(worker.outcomes)
        try:
            async with worker.client.connect():
                while time.monotonic() < deadline and len(worker.outcomes) < max_calls and not stop.is_set():
                    await worker.step()
        except Exception as error:  # the session broke (server gone, connection reset, refused initialize…)
            status = worker.client.last_http_status
            label = f"http-{status}" if status is not None and status >= 400 else "transport"
            worker.outcomes.append(Outcome("session", label, time.monotonic(), 0.0, detail=_describe(error)))
        if len(worker.outcomes) == before + 1 or len(worker.outcomes) == before:
            await asyncio.sleep(0.2)  # nothing got through: do not spin


# ---------------------------------------------------------------- servers


def cache_dir() -> Path:
    return Path(os.environ.get("SYNAPTO_EMBEDDING__CACHE_DIR", DEFAULT_CACHE_DIR)).expanduser()


@dataclass
class ServerProcess:
    """`synaptomind serve` in a subprocess, exactly as a deployment starts it."""

    port: int
    process: subprocess.Popen[bytes]
    log_file: Path
    workers: int = 1

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    def health(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{self.base_url}/health", timeout=2) as response:
                body: dict[str, Any] = json.load(response)
                return body
        except OSError:
            return None

    def wait_ready(self, timeout: float = 120) -> None:
        """Until the embedder is ready (of every worker: `workers_ready`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}: {self.log_tail()}")
            body = self.health()
            if body is not None:
                state = body["checks"]["embedder"]["state"]
                if state == "ready" and (self.workers == 1 or self.workers_ready()):
                    return
                if state in ("fallback", "unavailable"):
                    raise RuntimeError(f"server embedder not ready: {body['checks']['embedder']}")
            time.sleep(0.2)
        raise RuntimeError(f"server not ready after {timeout:.0f}s: {self.log_tail()}")

    def workers_ready(self) -> bool:
        """Whether every worker's /health says its embedder is ready: asked on a kept-alive connection of each,
        the worker that accepted it found by its socket (the kernel picks a worker per new connection)."""
        import http.client

        import psutil

        workers = [
            child for child in psutil.Process(self.process.pid).children() if "spawn_main" in child.cmdline()[-2:][0]
        ]
        answered: dict[int, bool] = {}
        for _ in range(10 * self.workers):
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            try:
                connection.request("GET", "/health")
                response = connection.getresponse()
                body = json.loads(response.read())
                local = connection.sock.getsockname()[1]
                for worker in workers:
                    if any(held.raddr and held.raddr.port == local for held in worker.net_connections("tcp")):
                        answered[worker.pid] = body["checks"]["embedder"]["state"] == "ready"
            except (OSError, ValueError, psutil.Error):
                pass
            finally:
                connection.close()
            if len(answered) == self.workers:
                break
        return len(answered) == self.workers and all(answered.values())

    def log_tail(self, characters: int = 2000) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-characters:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def server_env(database_url: str, data_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a `serve` under load: the served default model (e5) unless `extra` names another."""
    env = {
        **os.environ,
        "SYNAPTO_DATABASE_URL": database_url,
        "SYNAPTO_DATA_DIR": str(data_dir),
        "SYNAPTO_EMBEDDING__MODEL": served_default_model(),
        "SYNAPTO_EMBEDDING__CACHE_DIR": str(cache_dir()),
        "SYNAPTO_EMBEDDING__ALLOW_DOWNLOAD": "false",
        "SYNAPTO_RATE_LIMIT__PER_MINUTE": "0",
        "SYNAPTO_AUTH__MODE": "token",
        "SYNAPTO_LOG_LEVEL": "WARNING",
        "SYNAPTO_HOST": "127.0.0.1",
    }
    env.update(extra or {})
    return env


def start_server(
    database_url: str, work_dir: Path, name: str, extra: dict[str, str] | None = None, workers: int = 1
) -> ServerProcess:
    port = free_port()
    data_dir = work_dir / f"data-{name}"
    data_dir.mkdir(parents=True, exist_ok=True)
    log_file = work_dir / f"server-{name}.log"
    with log_file.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                str(workers),
            ],
            env=server_env(database_url, data_dir, extra),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return ServerProcess(port, process, log_file, workers)


@contextlib.contextmanager
def servers(
    database_url: str, work_dir: Path, count: int = 1, extra: dict[str, str] | None = None, workers: int = 1
) -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    try:
        for index in range(count):
            started.append(start_server(database_url, work_dir, f"s{index}", extra, workers))
        for server in started:
            server.wait_ready()
        yield started
    finally:
        for server in started:
            server.stop()


@contextlib.contextmanager
def temporary_database(work_dir: Path) -> Iterator[str]:
    """An embedded PostgreSQL in `work_dir` (deleted on exit), migrated to head."""
    embedded = EmbeddedPostgres(work_dir / "pg", delete_on_stop=True, server_settings=tuned_server_settings())
    url = embedded.start()
    try:
        migrations.upgrade(url)
        yield url
    finally:
        embedded.stop()


def engine_for(url: str) -> AsyncEngine:
    return create_async_engine(url, poolclass=NullPool)


async def create_tokens(url: str, names: Sequence[str], role: Role = Role.writer) -> list[str]:
    from app.db.engine import Database

    engine = engine_for(url)
    db = Database(engine)
    tokens = []
    try:
        for name in names:
            async with db.unit_of_work() as session:
                token, _ = await AuthService(session).create_token(name, role, "bench.load")
            tokens.append(token)
    finally:
        await engine.dispose()
    return tokens


# ---------------------------------------------------------------- setup and run


async def seed(url: str, token: str, per_project: int = 40) -> Ledger:
    """Projects p0..p2 with a few thoughts each, so the first searches and links have material."""
    ledger = Ledger()
    client = McpClient(url, token)
    async with client.connect():
        rng = random.Random(7)
        worker = Worker(-1, client, ledger, rng)
        for index in range(PROJECTS):
            args: dict[str, Any] = {"action": "create", "name": f"load-p{index}", "local_path": project_path(index)}
            outcome = await client.call("setup", "memory_manage", args)
            if not outcome.ok and outcome.status != "409":
                raise RuntimeError(f"project set-up failed: {outcome}")
            thoughts = [{"content": worker._content(), "tags": worker._tags()} for _ in range(per_project)]
            args = {"action": "bulk_create", "cwd": project_path(index), "thoughts": thoughts}
            outcome = await client.call("setup", "memory_store", args)
            if not outcome.ok:
                raise RuntimeError(f"seeding failed: {outcome}")
            for item in outcome.result["items"]:
                ledger.add_thought(item["thought"]["id"])
    return ledger


@dataclass
class RunResult:
    outcomes: list[Outcome]
    elapsed: float
    ledger: Ledger


async def run_load(
    urls: Sequence[str],
    tokens: Sequence[str],
    seconds: float,
    max_calls: int,
    ledger: Ledger,
    seed_value: int = 1,
    stop: asyncio.Event | None = None,
) -> RunResult:
    """Client i uses tokens[i] against urls[i % len(urls)] until the deadline; all in this event loop."""
    stop = stop or asyncio.Event()
    workers = [
        Worker(index, McpClient(urls[index % len(urls)], token), ledger, random.Random(seed_value * 1000 + index))
        for index, token in enumerate(tokens)
    ]
    started = time.monotonic()
    deadline = started + seconds
    tasks = [asyncio.create_task(run_worker(worker, deadline, max_calls, stop)) for worker in workers]
    try:
        async with asyncio.timeout(seconds + CALL_TIMEOUT + 30):  # the hard bound of the whole run
            await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    elapsed = time.monotonic() - started
    return RunResult([outcome for worker in workers for outcome in worker.outcomes], elapsed, ledger)


# ---------------------------------------------------------------- what the server's connections wait on


async def sample_database(url: str, every: float = 0.5) -> collections.Counter[str]:
    """Once per `every` seconds: what each server connection is doing (state / wait event), tallied."""
    seen: collections.Counter[str] = collections.Counter()
    engine = engine_for(url)
    sql = text(
        "SELECT state, coalesce(wait_event_type || ':' || wait_event, 'cpu') AS wait FROM pg_stat_activity "
        "WHERE application_name = 'synaptomind' AND pid <> pg_backend_pid()"
    )
    try:
        async with engine.connect() as connection:
            while True:
                for row in await connection.execute(sql):
                    seen["idle" if row.state == "idle" else f"{row.state} {row.wait}"] += 1
                seen["samples"] += 1
                await connection.rollback()
                await asyncio.sleep(every)
    except asyncio.CancelledError:
        return seen
    finally:
        await engine.dispose()


async def _stop_sampler(sampler: asyncio.Task[collections.Counter[str]] | None) -> dict[str, float]:
    """Mean number of server connections per state across the samples."""
    if sampler is None:
        return {}
    sampler.cancel()
    try:
        seen = await sampler
    except Exception:
        return {}
    samples = max(1, seen.pop("samples", 0))
    return {state: round(count / samples, 2) for state, count in seen.most_common(8)}


# ---------------------------------------------------------------- invariants


async def check_invariants(
    url: str, ledger: Ledger, fresh_database: bool = True, exact_hits: bool = True
) -> tuple[int, list[str]]:
    """(lost acknowledged writes, violations) — both must be 0/empty."""
    engine = engine_for(url)
    violations: list[str] = []
    lost = 0
    try:
        async with engine.connect() as connection:

            async def rows(sql: str, **params: Any) -> list[Any]:
                return list((await connection.execute(text(sql), params)).all())

            known = sorted(ledger.thoughts | ledger.archive_uncertain)
            status = {
                str(row.id): row.status
                for row in await rows(
                    "SELECT id, status::text AS status FROM thought WHERE id = ANY(CAST(:ids AS uuid[]))", ids=known
                )
            }
            missing = [thought_id for thought_id in ledger.thoughts if thought_id not in status]
            lost += len(missing)
            if missing:
                violations.append(f"{len(missing)} acknowledged thought(s) missing, e.g. {missing[:3]}")
            not_archived = [t for t in ledger.archived if t in status and status[t] != "archived"]
            if not_archived:
                violations.append(f"{len(not_archived)} acknowledged archive(s) not archived, e.g. {not_archived[:3]}")
                lost += len(not_archived)
            stray = [
                t
                for t, s in status.items()
                if s == "archived" and t not in ledger.archived and t not in ledger.archive_uncertain
            ]
            if stray:
                violations.append(f"{len(stray)} thought(s) archived without an archive call, e.g. {stray[:3]}")

            edge_ids = sorted(set(ledger.edges) | set(ledger.edges_deleted))
            present_edges = {
                str(row.id)
                for row in await rows("SELECT id FROM edge WHERE id = ANY(CAST(:ids AS uuid[]))", ids=edge_ids)
            }
            deleted_pairs = {
                frozenset(pair) for pair in [*ledger.edges_deleted.values(), *ledger.unlink_uncertain.values()]
            }
            missing_edges = [
                e
                for e in ledger.edges
                if e not in present_edges and e not in ledger.edges_deleted and e not in ledger.unlink_uncertain
            ]
            lost += len(missing_edges)
            if missing_edges:
                violations.append(f"{len(missing_edges)} acknowledged edge(s) missing, e.g. {missing_edges[:3]}")
            undeleted = [e for e in ledger.edges_deleted if e in present_edges]
            if undeleted:
                violations.append(f"{len(undeleted)} acknowledged unlink(s) left the edge, e.g. {undeleted[:3]}")

            pairs = sorted({tuple(sorted(pair)) for pair in ledger.batch_pairs})
            if pairs:
                linked = {
                    (str(row.low), str(row.high))
                    for row in await rows(
                        "SELECT least(source_id, target_id) AS low, greatest(source_id, target_id) AS high FROM edge "
                        "WHERE (least(source_id, target_id), greatest(source_id, target_id)) IN "
                        "(SELECT * FROM unnest(CAST(:lows AS uuid[]), CAST(:highs AS uuid[])))",
                        lows=[p[0] for p in pairs],
                        highs=[p[1] for p in pairs],
                    )
                }
                unlinked = [p for p in pairs if p not in linked and frozenset(p) not in deleted_pairs]
                lost += len(unlinked)
                if unlinked:
                    violations.append(f"{len(unlinked)} link_batch pair(s) acknowledged as linked have no edge")

            for call in ledger.bulk_calls:
                [count] = (
                    await rows("SELECT count(*) AS n FROM thought WHERE CAST(:tag AS text) = ANY(tags)", tag=call.tag)
                )[0]
                if call.acknowledged and count != len(call.ids):
                    violations.append(f"bulk_create {call.tag}: acknowledged {len(call.ids)} rows, found {count}")
                    lost += max(0, len(call.ids) - count)
                elif not call.acknowledged and count not in (0, call.rows):
                    violations.append(f"bulk_create {call.tag} (not acknowledged): {count} of {call.rows} rows")

            checks = {
                "unordered pairs with two edges": "SELECT count(*) FROM (SELECT 1 FROM edge GROUP BY "
                "least(source_id, target_id), greatest(source_id, target_id) HAVING count(*) > 1) AS d",
                "self-loops": "SELECT count(*) FROM edge WHERE source_id = target_id",
                "dangling edges": "SELECT count(*) FROM edge e WHERE NOT EXISTS (SELECT 1 FROM thought t WHERE "
                "t.id = e.source_id) OR NOT EXISTS (SELECT 1 FROM thought t WHERE t.id = e.target_id)",
                "negative hit counts": "SELECT count(*) FROM thought_hit WHERE hit_count < 0",
                "hits of missing thoughts": "SELECT count(*) FROM thought_hit h WHERE NOT EXISTS "
                "(SELECT 1 FROM thought t WHERE t.id = h.thought_id)",
                "hits filed under another project": "SELECT count(*) FROM thought_hit h JOIN thought t "
                "ON t.id = h.thought_id WHERE h.project_id <> t.project_id",
                "primers of missing thoughts": "SELECT count(*) FROM primer p WHERE NOT EXISTS "
                "(SELECT 1 FROM thought t WHERE t.id = p.thought_id)",
                "importance out of [0, 1]": "SELECT count(*) FROM thought WHERE importance < 0 OR importance > 1",
                "archived status without archived_at (or back)": "SELECT count(*) FROM thought WHERE "
                "(status = 'archived') <> (archived_at IS NOT NULL)",
            }
            if fresh_database:
                checks["primers below the promotion threshold"] = (
                    "SELECT count(*) FROM primer p LEFT JOIN thought_hit h ON h.thought_id = p.thought_id "
                    f"WHERE coalesce(h.hit_count, 0) < {PRIMER_THRESHOLD}"
                )
                checks["thoughts at the threshold without a primer"] = (
                    "SELECT count(*) FROM thought_hit h WHERE h.hit_count >= "
                    f"{PRIMER_THRESHOLD} AND NOT EXISTS (SELECT 1 FROM primer p WHERE p.thought_id = h.thought_id)"
                )
            for name, sql in checks.items():
                [count] = (await rows(sql))[0]
                if count:
                    violations.append(f"{name}: {count}")

            if fresh_database and exact_hits:
                hits = {str(row.thought_id): int(row.hit_count) for row in await rows("SELECT * FROM thought_hit")}
                over = {t: n for t, n in hits.items() if n > ledger.read_hits.get(t, 0)}
                if over:
                    example = next(iter(over))
                    violations.append(
                        f"{len(over)} thought(s) counted more hits than answers showed them "
                        f"(e.g. {example}: {over[example]} hits, {ledger.read_hits.get(example, 0)} answers)"
                    )
                [reflected] = (await rows("SELECT count(*) FROM thought WHERE 'reflect' = ANY(tags)"))[0]
                if reflected < ledger.reflect_created:
                    violations.append(f"reflect acknowledged {ledger.reflect_created} thoughts, found {reflected}")
                    lost += ledger.reflect_created - reflected
    finally:
        await engine.dispose()
    return lost, violations


# ---------------------------------------------------------------- report


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def summarize(run: RunResult) -> dict[str, Any]:
    by_action: dict[str, list[Outcome]] = collections.defaultdict(list)
    for outcome in run.outcomes:
        by_action[outcome.action].append(outcome)
    actions = {}
    for action, outcomes in sorted(by_action.items()):
        latencies = [o.elapsed * 1000 for o in outcomes if o.action != "session"]
        actions[action] = {
            "calls": len(outcomes),
            "errors": sum(1 for o in outcomes if not o.ok),
            "p50_ms": round(percentile(latencies, 0.50), 1) if latencies else None,
            "p95_ms": round(percentile(latencies, 0.95), 1) if latencies else None,
            "p99_ms": round(percentile(latencies, 0.99), 1) if latencies else None,
            "mean_ms": round(statistics.fmean(latencies), 1) if latencies else None,
        }
    errors = collections.Counter(o.status for o in run.outcomes if not o.ok)
    unclassified = [o for o in run.outcomes if not o.ok and not o.classified]
    calls = sum(1 for o in run.outcomes if o.action != "session")
    return {
        "calls": calls,
        "elapsed_s": round(run.elapsed, 2),
        "calls_per_s": round(calls / run.elapsed, 1) if run.elapsed else 0.0,
        "actions": actions,
        "errors_by_status": dict(sorted(errors.items())),
        "unclassified_errors": len(unclassified),
        "unclassified_examples": [f"{o.action}: {o.status} {o.detail}" for o in unclassified[:5]],
        "acknowledged": run.ledger.counts(),
    }


def print_report(report: dict[str, Any]) -> None:
    print(
        f"\n{report['clients']} client(s), {report['elapsed_s']:.1f}s on {report['machine']}: "
        f"{report['calls']} calls, {report['calls_per_s']} calls/s"
    )
    print(f"{'action':<17}{'calls':>7}{'errors':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    for action, row in report["actions"].items():
        cells = [row[key] if row[key] is not None else float("nan") for key in ("p50_ms", "p95_ms", "p99_ms")]
        print(f"{action:<17}{row['calls']:>7}{row['errors']:>8}{cells[0]:>9.1f}{cells[1]:>9.1f}{cells[2]:>9.1f}")
    print(f"errors by status: {report['errors_by_status'] or 'none'}")
    print(f"unclassified errors: {report['unclassified_errors']}")
    for example in report["unclassified_examples"]:
        print(f"  {example}")
    if report.get("server_connections"):
        print(f"server connections, mean per state: {report['server_connections']}")
    if "cpu_s" in report:
        print(f"CPU seconds used: {report['cpu_s']}")
    for error in report.get("server_errors", []):
        print(f"  server: {error}")
    print(f"acknowledged: {report['acknowledged']}")
    print(f"lost acknowledged writes: {report['lost_acknowledged_writes']}")
    print(f"invariant violations: {len(report['invariant_violations'])}")
    for violation in report["invariant_violations"]:
        print(f"  {violation}")
    print(f"{'PASS' if report['passed'] else 'FAIL'} load {report['clients']} client(s)")


async def load_against(
    urls: Sequence[str],
    database_url: str | None,
    clients: int,
    seconds: float,
    max_calls: int,
    token: str | None = None,
    fresh_database: bool = True,
    seed_value: int = 1,
    exact_hits: bool = True,
) -> dict[str, Any]:
    """The whole load run against running server(s): tokens, seed, clients, invariants, report."""
    run_id = f"{int(time.time())}-{random.randrange(10**6)}"
    if database_url is not None:
        [admin] = await create_tokens(database_url, [f"load-admin-{run_id}"], Role.admin)
        tokens = await create_tokens(database_url, [f"load-agent-{run_id}-{i}" for i in range(clients)])
    elif token is not None:
        admin, tokens = token, [token] * clients
    else:
        raise ValueError("need a database URL (to create tokens and check invariants) or a token")
    ledger = await seed(urls[0], admin)
    sampler = asyncio.create_task(sample_database(database_url)) if database_url is not None else None
    try:
        run = await run_load(urls, tokens, seconds, max_calls, ledger, seed_value)
    finally:
        waits = await _stop_sampler(sampler)
    report = {"clients": clients, "seconds": seconds, "servers": len(urls), "machine": machine(), **summarize(run)}
    report["server_connections"] = waits
    if database_url is not None:
        lost, violations = await check_invariants(database_url, ledger, fresh_database, exact_hits)
    else:
        lost, violations = 0, ["invariants not checked: no --database-url"]
    report["lost_acknowledged_writes"] = lost
    report["invariant_violations"] = violations
    report["passed"] = report["unclassified_errors"] == 0 and lost == 0 and not violations and report["calls"] > 0
    return report


def run_default(args: argparse.Namespace) -> dict[str, Any]:
    """Own embedded database and server(s); the report of the run."""
    with tempfile.TemporaryDirectory(prefix="synapto-load-") as tmp:
        work_dir = Path(tmp)
        extra = {"SYNAPTO_EMBEDDING__MODEL": args.model}
        if args.embed_threads is not None:
            extra["SYNAPTO_EMBEDDING__THREADS"] = str(args.embed_threads)
        with (
            temporary_database(work_dir) as url,
            servers(url, work_dir, args.servers, extra, workers=args.workers) as running,
        ):
            urls = [server.mcp_url for server in running]
            try:
                before = cpu_seconds(running, work_dir / "pg" / "pgdata")
                report = asyncio.run(load_against(urls, url, args.clients, args.seconds, args.max_calls))
                report["workers"] = args.workers
                report["model"] = args.model
                report["embed_threads"] = args.embed_threads
                after = cpu_seconds(running, work_dir / "pg" / "pgdata")
                report["cpu_s"] = {key: round(after[key] - before[key], 1) for key in after}
                report["server_errors"] = [
                    error for server in running for error in logged_errors(server.log_tail(10**7))
                ]
                return report
            except BaseException:
                for server in running:
                    print(f"--- {server.log_file.name}\n{server.log_tail()}", file=sys.stderr)
                raise


def logged_errors(log: str, limit: int = 20) -> list[str]:
    """ERROR records of a server's JSON log: the message and the last line of its traceback."""
    errors = []
    for line in log.splitlines():
        with contextlib.suppress(ValueError, AttributeError):
            record = json.loads(line)
            if record.get("level") == "ERROR":
                trace = str(record.get("exception", "")).strip().splitlines()
                errors.append(f"{record.get('message', '')}: {trace[-1] if trace else ''}"[:500])
    return errors[:limit]


def cpu_seconds(running: Sequence[ServerProcess], pgdata: Path) -> dict[str, float]:
    """CPU time used so far by this process (the clients), the server process(es) and PostgreSQL."""
    import psutil

    def total(process: psutil.Process) -> float:
        times = process.cpu_times()
        return float(times.user + times.system)

    def tree(pid: int) -> float:
        try:
            root = psutil.Process(pid)
            return total(root) + sum(total(child) for child in root.children(recursive=True))
        except psutil.Error:
            return 0.0

    postgres = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        postgres = tree(int((pgdata / "postmaster.pid").read_text().split()[0]))
    return {
        "clients": time.process_time(),
        "server": sum(tree(server.process.pid) for server in running),
        "postgres": postgres,
    }


def write_report(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
