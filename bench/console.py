"""Benchmark: the web console's pages at scale — server time per page (issue 18: ≤ 100 ms at 100 k thoughts).

    cp -a bench/.data/100000 /tmp/console100k               # a copy: this run migrates it and writes to it
    python -m bench.console --data-dir /tmp/console100k      # 30 timed requests per page after 5 of warm-up

The data set is `bench.dataset`'s (100 k realistic thoughts over 5 projects, 50/25/15/7/3 %); this bench
refuses a data set under bench/.data itself, because it migrates the database to head, creates an admin user
and token, runs one background-jobs tick (the decay, the counts, the project indexes, the stored health
report, as a serving replica has) and enqueues edge proposals so the review queue has a page of them; the
health page's Check now replaces the stored report.

The console app is `create_http_app` (token auth, the offline model that embedded the data set, rate limit and
jobs off) driven in this
process through httpx's ASGI transport: no network, no uvicorn. Signed in as the admin once; then each page
is requested `--warmup` times untimed and `--requests` times timed, one at a time (a form, Check now, is
posted with the session's CSRF token). "server" is the page's
own `Server-Timing: app;dur=` (from the session check to the rendered page, the tools' calls included);
"wall" is the client's, the ASGI plumbing and the cookie parsing on top; "CPU per request" is this process's CPU
time (console and client) and PostgreSQL's over the timed requests, divided by their number (/proc, 10 ms
ticks). Then `memory_status action=health` itself, without and with `include_details`, called through
`dispatch` as the MCP server calls it (the health report the MCP action answers live). `--only health` limits
the run to the pages and calls whose name holds
that text. Results go to stdout and to bench/results/console-<N>.json (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx2
from pydantic import SecretStr
from sqlalchemy import text

from app.config import Settings
from app.db import migrations
from app.db.embedded import EmbeddedPostgres, tuned_server_settings
from app.db.engine import build_engine
from app.db.models import Role
from app.embedding.profiles import OFFLINE_MINILM
from app.main import build_context, create_http_app, freeze_long_lived
from app.services.admin.users import UserService
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from app.services.jobs import background as jobs
from bench.common import machine
from bench.dataset import DATA_ROOT, CallTool, _prewarm, generate_queries, model_cache_dir, tool_caller
from bench.search import CpuMeter, pct

BASE = "http://127.0.0.1:8765"
CSRF = re.compile(r'name="csrf" value="([^"]*)"')
RESULTS = Path(__file__).resolve().parent / "results"
BENCH_USER = "bench-console"


@dataclass
class Page:
    name: str
    urls: Callable[[int], str]  # the i-th request's URL
    posted: bool = False  # a form (POST with the session's CSRF token) instead of a GET


@dataclass
class World:
    """What the pages need of the data set: ids and queries, chosen once (seeded)."""

    largest_project: dict[str, Any]
    thought_ids: list[str]
    busiest_id: str
    queries: list[str]
    thoughts: int
    tag: str  # the largest project's most used tag
    day: str  # the largest project's busiest creation day (YYYY-MM-DD)
    default_project: str  # the default project's id: it has no path, the console scopes it by id


async def _count(context: AppContext, sql: str) -> Any:
    async with context.db.unit_of_work() as session:
        return (await session.execute(text(sql))).scalar_one()


async def prepare(context: AppContext, requests: int) -> World:
    """The admin, one jobs tick, a queue of edge proposals, and the ids and queries the pages are asked for."""
    async with context.db.unit_of_work() as session:
        admin = await UserService(session).ensure_user(BENCH_USER, Role.admin)
    started = time.perf_counter()
    await jobs.run_jobs_tick(context.db, context.settings)  # as a serving replica has run it: counts, indexes
    print(f"  one background-jobs tick in {time.perf_counter() - started:.0f} s", flush=True)
    call = tool_caller(context, admin)
    projects = (await call("memory_manage", {"action": "list"}))["items"]
    async with context.db.unit_of_work() as session:
        found = await session.execute(
            text(
                "SELECT p.local_path FROM project p JOIN thought t ON t.project_id = p.id "
                "WHERE p.local_path IS NOT NULL GROUP BY p.local_path ORDER BY count(*) DESC LIMIT 1"
            )
        )
        largest_path = str(found.scalar_one())
        with_edges = [
            str(row[0])
            for row in await session.execute(
                text(
                    "SELECT t.id FROM thought t WHERE EXISTS (SELECT 1 FROM edge e WHERE e.source_id = t.id "
                    "OR e.target_id = t.id) ORDER BY md5(t.id::text) LIMIT :n"
                ),
                {"n": requests},
            )
        ]
        plain = [
            str(row[0])
            for row in await session.execute(
                text("SELECT id FROM thought WHERE status = 'active' ORDER BY md5(id::text || 'plain') LIMIT :n"),
                {"n": requests},
            )
        ]
        busiest = (
            await session.execute(
                text(
                    "SELECT id FROM (SELECT source_id AS id FROM edge UNION ALL SELECT target_id FROM edge) e "
                    "GROUP BY id ORDER BY count(*) DESC, id LIMIT 1"
                )
            )
        ).scalar_one()
        tag = (
            await session.execute(
                text(
                    "SELECT tag FROM thought t JOIN project p ON p.id = t.project_id, unnest(t.tags) AS tag "
                    "WHERE p.local_path = :path GROUP BY tag ORDER BY count(*) DESC, tag LIMIT 1"
                ),
                {"path": largest_path},
            )
        ).scalar_one_or_none()
        day = (
            await session.execute(
                text(
                    "SELECT to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM thought t "
                    "JOIN project p ON p.id = t.project_id WHERE p.local_path = :path "
                    "GROUP BY day ORDER BY count(*) DESC, day LIMIT 1"
                ),
                {"path": largest_path},
            )
        ).scalar_one()
    largest = next(project for project in projects if project.get("local_path") == largest_path)
    default = next(project for project in projects if project.get("is_default"))
    pending = await _count(context, "SELECT count(*) FROM placement_proposal WHERE status = 'pending'")
    if pending < 25:  # a full page of the queue: enqueue the largest project's thoughts until there is one
        for thought_id in plain:
            await call("edge_review", {"action": "enqueue", "thought_id": thought_id})
            if await _count(context, "SELECT count(*) FROM placement_proposal WHERE status = 'pending'") >= 25:
                break
    ids = [thought_id for pair in zip(with_edges, plain, strict=False) for thought_id in pair][:requests]
    queries = [query.text for query in generate_queries(max(requests, 20), project=0)]
    thoughts = int(await _count(context, "SELECT count(*) FROM thought"))
    return World(largest, ids, str(busiest), queries, thoughts, str(tag or ""), str(day), str(default["id"]))


def pages(world: World) -> list[Page]:
    project = world.largest_project["id"]
    ids, queries = world.thought_ids, world.queries

    def search(i: int, scoped: bool, **more: str) -> str:
        query = {"query": queries[i % len(queries)], **({"project": project} if scoped else {}), **more}
        return "/ui/search?" + urlencode(query)

    def browse(i: int, **filters: str) -> str:
        return "/ui/browse?" + urlencode({"project": project, **filters, "offset": str(50 * (i % 5))})

    return [
        Page("search, one project (the largest)", lambda i: search(i, True)),
        Page("search, every project", lambda i: search(i, False)),
        Page("search, largest project, 100 hits (the most)", lambda i: search(i, True, limit="100")),
        Page("search, the default project (no path)", lambda i: search(i, False, project=world.default_project)),
        Page("thought page (get + chain + graph)", lambda i: f"/ui/thoughts/{ids[i % len(ids)]}"),
        Page("thought page, the most linked thought", lambda i: f"/ui/thoughts/{world.busiest_id}"),
        Page(
            "timeline, largest project (offsets 0–200)",
            lambda i: f"/ui/projects/{project}/timeline?offset={50 * (i % 5)}",
        ),
        Page("browse, largest project (offsets 0–200)", lambda i: browse(i)),
        Page("browse, every project (offsets 0–200)", lambda i: browse(i, project="")),
        Page(f"browse by tag {world.tag!r} (offsets 0–200)", lambda i: browse(i, tag=world.tag)),
        Page("browse by edge type related (offsets 0–200)", lambda i: browse(i, edge="related")),
        Page("browse by standing superseded", lambda i: browse(i, standing="superseded")),
        Page("browse by standing protected", lambda i: browse(i, standing="protected")),
        Page(
            f"browse by date {world.day} (offsets 0–200)", lambda i: browse(i, **{"from": world.day, "to": world.day})
        ),
        Page(
            "project graph, largest project (offsets 0–160)",
            lambda i: f"/ui/graph?project={project}&offset={40 * (i % 5)}",
        ),
        Page("project graph picker", lambda i: "/ui/graph"),
        Page("edge review queue (25 proposals)", lambda i: "/ui/review/edges"),
        Page("retention review list", lambda i: "/ui/review/retention"),
        Page("auto-cluster form", lambda i: "/ui/review/clusters"),
        Page("operations (counts, job state)", lambda i: "/ui/admin/operations"),
        Page("health (the stored report)", lambda i: "/ui/admin/health"),
        Page("health, Check now (every check, stored)", lambda i: "/ui/admin/health/check", posted=True),
        Page("users", lambda i: "/ui/admin/users"),
        Page("members (memberships)", lambda i: "/ui/admin/members"),
        Page("tokens", lambda i: "/ui/admin/tokens"),
    ]


async def sign_in(client: httpx2.AsyncClient, token: str) -> str:
    """Signs in; answers the session's CSRF token, which the pages' forms carry."""
    form = await client.get("/ui/sign-in")
    found = CSRF.search(form.text)
    assert found is not None, form.text[:300]
    answer = await client.post("/ui/sign-in", data={"csrf": found[1], "token": token, "next": "/ui/"})
    if answer.status_code != 303:
        raise SystemExit(f"sign-in failed: {answer.status_code} {answer.text[:300]}")
    page = await client.get("/ui/admin/tokens")
    csrf = CSRF.search(page.text)
    assert csrf is not None, page.text[:300]
    return csrf[1]


async def measure(
    client: httpx2.AsyncClient, page: Page, warmup: int, requests: int, csrf: str, meter: CpuMeter
) -> dict[str, Any]:
    """Server and wall times per request, and the CPU time per timed request of this process (the console and
    the client) and of PostgreSQL: the figure a loaded machine inflates least (its latencies wait for a core)."""
    server: list[float] = []
    wall: list[float] = []
    before: dict[str, Any] = {}
    for i in range(warmup + requests):
        if i == warmup:
            before = meter.snapshot()
        started = time.perf_counter()
        if page.posted:
            answer = await client.post(page.urls(i), data={"csrf": csrf})
        else:
            answer = await client.get(page.urls(i))
        elapsed = (time.perf_counter() - started) * 1000
        if answer.status_code != 200:
            raise SystemExit(f"{page.name}: {answer.status_code} {answer.text[:500]}")
        if i >= warmup:
            server.append(float(answer.headers["server-timing"].split("dur=")[1]))
            wall.append(elapsed)
    cpu = meter.since(before)
    return {
        "page": page.name,
        "n": len(server),
        "server_p50": round(pct(server, 50), 1),
        "server_p95": round(pct(server, 95), 1),
        "server_min": round(min(server), 1),
        "server_max": round(max(server), 1),
        "wall_p50": round(pct(wall, 50), 1),
        "process_cpu_ms": round(cpu["client_cpu_s"] * 1000 / len(server), 1),
        "postgres_cpu_ms": round(cpu["postgres_cpu_s"] * 1000 / len(server), 1),
        "load1": cpu["load1"],
    }


async def measure_tool(
    call: CallTool, name: str, arguments: dict[str, Any], warmup: int, requests: int
) -> dict[str, Any]:
    """A tool call's wall time in this process (dispatch, the service, the answer's shaping), one at a time."""
    times: list[float] = []
    for i in range(warmup + requests):
        started = time.perf_counter()
        await call("memory_status", arguments)
        if i >= warmup:
            times.append((time.perf_counter() - started) * 1000)
    return {
        "call": name,
        "n": len(times),
        "p50": round(pct(times, 50), 1),
        "p95": round(pct(times, 95), 1),
        "min": round(min(times), 1),
        "max": round(max(times), 1),
    }


TOOL_CALLS = (
    ("memory_status action=health", {"action": "health"}),
    ("memory_status action=health include_details", {"action": "health", "include_details": True}),
)


async def stored_model(url: str) -> str:
    """The model that embedded the data set's thoughts: the console searches with it, as a server configured for
    that set does (a vector leg of another model finds no row of its own and walks the whole index for none)."""
    engine = build_engine(url, 1)
    try:
        async with engine.connect() as connection:
            found = await connection.execute(
                text("SELECT embedding_model FROM thought WHERE embedding_model IS NOT NULL LIMIT 1")
            )
            return str(found.scalar_one_or_none() or OFFLINE_MINILM)
    finally:
        await engine.dispose()


async def run(url: str, args: argparse.Namespace, work_dir: Path, pgdata: Path) -> dict[str, Any]:
    model = await stored_model(url)
    print(f"  the data set's model: {model}", flush=True)
    settings = Settings(
        _env_file=None,
        database_url=SecretStr(url),
        auth={"mode": "token"},
        data_dir=work_dir,
        embedding={"model": model, "cache_dir": model_cache_dir()},
        rate_limit={"per_minute": 0},  # 18 tool calls an operations page: the bench would hit the default limit
        jobs={"enabled": False},
    )
    context = build_context(settings, url)
    await context.embedding.load()
    if not context.embedding.available:
        raise SystemExit(f"offline model not loadable: {context.embedding.note} (run `make model`)")
    try:
        world = await prepare(context, args.requests)
        async with context.db.unit_of_work() as session:
            token, _ = await AuthService(session).create_token(BENCH_USER, None, "bench.console session")
        print(f"  prewarmed: {await _prewarm(url)}", flush=True)
        app = create_http_app(settings, context)
        transport = httpx2.ASGITransport(app=app)
        results = []
        meter = CpuMeter(pgdata)
        async with httpx2.AsyncClient(transport=transport, base_url=BASE) as client:
            csrf = await sign_in(client, token)
            freeze_long_lived()  # as a server does once its embedder is loaded (app.main.background)
            for page in pages(world):
                if args.only and args.only not in page.name:
                    continue
                result = await measure(client, page, args.warmup, args.requests, csrf, meter)
                print(
                    f"  {result['page']:<45} server p50 {result['server_p50']:>7.1f} ms  p95 "
                    f"{result['server_p95']:>7.1f} ms  max {result['server_max']:>7.1f} ms  "
                    f"(wall p50 {result['wall_p50']:.1f} ms; CPU per request {result['process_cpu_ms']:.1f} "
                    f"+ PostgreSQL {result['postgres_cpu_ms']:.1f} ms; load {result['load1']:.1f})",
                    flush=True,
                )
                results.append(result)
        async with context.db.unit_of_work() as session:
            admin = await UserService(session).ensure_user(BENCH_USER, Role.admin)
        call = tool_caller(context, admin)
        calls = []
        for name, arguments in TOOL_CALLS:
            if args.only and args.only not in name:
                continue
            measured = await measure_tool(call, name, arguments, args.warmup, args.requests)
            print(
                f"  {name:<45} p50 {measured['p50']:>7.1f} ms  p95 {measured['p95']:>7.1f} ms  "
                f"max {measured['max']:>7.1f} ms",
                flush=True,
            )
            calls.append(measured)
        return {
            "machine": machine(),
            "thoughts": world.thoughts,
            "largest_project": world.largest_project["name"],
            "model": model,
            "warmup": args.warmup,
            "requests": args.requests,
            "pages": results,
            "tool_calls": calls,
        }
    finally:
        await context.db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="a copy of bench/.data/<N> (holds pgdata/)")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--only", default="", help="only the pages and tool calls whose name holds this text")
    args = parser.parse_args()
    data_dir = args.data_dir.resolve()
    if data_dir.is_relative_to(DATA_ROOT.resolve()):
        raise SystemExit(f"{data_dir} is a cached data set: copy it first (cp -a {data_dir} /tmp/console…)")
    if not (data_dir / "pgdata").is_dir():
        raise SystemExit(
            f"{data_dir / 'pgdata'} not found: pass the copy of bench/.data/<N> (the folder holding pgdata)"
        )
    embedded = EmbeddedPostgres(data_dir, server_settings=tuned_server_settings())
    url = embedded.start()
    try:
        migrations.upgrade(url)
        logging.getLogger().setLevel(logging.WARNING)  # after the migration's logging set-up: no line per request
        with tempfile.TemporaryDirectory(prefix="bench-console-") as work:
            report = asyncio.run(run(url, args, Path(work), embedded.pgdata))
    finally:
        embedded.stop()
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"console-{report['thoughts']}.json"
    out.write_text(json.dumps(report, indent=2, default=str))
    print(f"results in {out}")


if __name__ == "__main__":
    main()
