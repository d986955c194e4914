"""Benchmark: the graph writes at their batch limits — link_batch of 1000 edges and archive_batch of 1000
thoughts (preview, then confirm), in ms per call.

    python -m bench.graph_writes               # 5 runs of each, median reported
    python -m bench.graph_writes --runs 9 --json bench/results/graph_writes.json

Every call goes through `app.mcp.dispatch.dispatch` in this process (validation, authorisation, the
unit of work, the service, the answer envelope — no HTTP), as a writer. Each run works on fresh rows:

- `link_batch`: 46 new thoughts, 1000 of their 1035 pairs linked in one call (a mix of edge types;
  every item is a new edge, so each pays the full link path: pair lock, both ends read, the pair
  check, the insert, the importance bump);
- `archive_batch`: 1000 new active thoughts; the preview call (reads them, issues a token) and the
  confirm call (redeems the token, locks and archives all 1000, writes the audit event) are timed
  separately.

A run is refused as invalid unless every item was linked / archived. The thoughts are inserted with
SQL (no embedding: neither action embeds anything), so the numbers are the graph writes alone.

Database: an embedded PostgreSQL in a temporary directory (deleted at the end), unless
SYNAPTO_DATABASE_URL is set (then the rows it creates are removed afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from app.config import DEFAULT_CACHE_DIR, EmbeddingSettings
from app.db import migrations
from app.db.embedded import EmbeddedPostgres
from app.db.engine import Database, build_engine
from app.db.models import Role
from app.db.records import Principal
from app.db.repositories.projects import ProjectRepository
from app.embedding.profiles import OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.mcp.dispatch import dispatch
from app.mcp.tools.catalog import ALL_SPECS
from app.services.auth.tokens import AuthService
from app.services.context import AppContext
from bench.bulk_create import server_version, wait_for_quiet
from bench.common import machine, shipped_settings

BATCH = 1000
LINK_THOUGHTS = 46  # 46 · 45 / 2 = 1035 pairs ≥ 1000
EDGE_TYPES = ("supports", "related", "depends_on", "references", "develops", "contradicts")
CallTool = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class Bench:
    def __init__(self, url: str) -> None:
        self.db = Database(build_engine(url, pool_size=2))
        self.project: uuid.UUID | None = None
        self.principal: Principal | None = None
        self.specs = {spec.name: spec for spec in ALL_SPECS}
        # neither action embeds: the runtime stays unloaded
        runtime = EmbeddingRuntime(EmbeddingSettings(model=OFFLINE_MINILM, cache_dir=DEFAULT_CACHE_DIR))
        self.context = AppContext(self.db, runtime, shipped_settings())

    async def setup(self) -> None:
        name = f"bench-graph-{uuid.uuid4().hex[:8]}"
        async with self.db.unit_of_work() as session:
            self.principal = await AuthService(session).ensure_user(name, Role.writer)
            self.project = await ProjectRepository(session).insert(name, None, None)  # open to everyone

    async def call(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """One dispatch call: (payload, seconds). Any error invalidates the run."""
        assert self.principal is not None
        started = time.perf_counter()
        result = await dispatch(self.specs[tool], arguments, self.context, self.principal)
        elapsed = time.perf_counter() - started
        if result.is_error:
            detail = "".join(getattr(block, "text", "") for block in result.content)
            raise SystemExit(f"{tool} {arguments.get('action')} failed: {detail[:500]}")
        assert result.structured_content is not None
        payload: dict[str, Any] = result.structured_content["result"]
        return payload, elapsed

    async def new_thoughts(self, count: int) -> list[str]:
        async with self.db.unit_of_work() as session:
            rows = await session.execute(
                text(
                    "INSERT INTO thought (id, project_id, content, created_by) "
                    "SELECT gen_random_uuid(), :p, 'graph bench thought ' || n || ' ' || :run, :u "
                    "FROM generate_series(1, :count) AS n RETURNING id"
                ),
                {
                    "p": self.project,
                    "run": uuid.uuid4().hex,
                    "u": self.principal.user_id if self.principal else None,
                    "count": count,
                },
            )
            return [str(row.id) for row in rows]

    async def link_batch(self) -> float:
        ids = await self.new_thoughts(LINK_THOUGHTS)
        pairs = [(ids[i], ids[j]) for i in range(len(ids)) for j in range(i + 1, len(ids))][:BATCH]
        links = [{"source": s, "target": t, "type": EDGE_TYPES[n % len(EDGE_TYPES)]} for n, (s, t) in enumerate(pairs)]
        payload, seconds = await self.call("memory_store", {"action": "link_batch", "links": links})
        counts = payload["meta"]["counts"]
        if (counts["linked"], counts["failed"]) != (BATCH, 0):
            raise SystemExit(f"link_batch linked {counts}; the run is invalid")
        return seconds

    async def archive_batch(self) -> tuple[float, float]:
        ids = await self.new_thoughts(BATCH)
        arguments: dict[str, Any] = {"action": "archive_batch", "thought_ids": ids}
        preview, preview_seconds = await self.call("memory_supersede", arguments)
        if preview["meta"]["counts"].get("would_archive") != BATCH:
            raise SystemExit(f"archive_batch previewed {preview['meta']['counts']}; the run is invalid")
        token = preview["meta"]["preview"]["token"]
        confirmed, confirm_seconds = await self.call(
            "memory_supersede", {**arguments, "confirm": True, "preview_token": token}
        )
        counts = confirmed["meta"]["counts"]
        if (counts["archived"], counts["failed"]) != (BATCH, 0):
            raise SystemExit(f"archive_batch archived {counts}; the run is invalid")
        return preview_seconds, confirm_seconds

    async def teardown(self) -> None:
        assert self.principal is not None
        async with self.db.unit_of_work() as session:
            await session.execute(text("DELETE FROM thought WHERE project_id = :p"), {"p": self.project})
            await session.execute(text("DELETE FROM project WHERE id = :p"), {"p": self.project})
            await session.execute(text("DELETE FROM preview_token WHERE user_id = :u"), {"u": self.principal.user_id})
            await session.execute(text("DELETE FROM audit_event WHERE user_id = :u"), {"u": self.principal.user_id})
            await session.execute(text("DELETE FROM app_user WHERE id = :u"), {"u": self.principal.user_id})
        await self.db.dispose()


def summary(seconds: list[float]) -> dict[str, float]:
    ms = [value * 1000 for value in seconds]
    return {
        "median_ms": round(statistics.median(ms), 1),
        "min_ms": round(min(ms), 1),
        "max_ms": round(max(ms), 1),
        "per_item_ms": round(statistics.median(ms) / BATCH, 3),
    }


async def main_async(args: argparse.Namespace, url: str) -> dict[str, Any]:
    print(f"machine: {machine()}; database: {await server_version(url)}")
    load_start = os.getloadavg()[0]
    print(f"load average at start: {load_start:.2f}")
    bench = Bench(url)
    await bench.setup()
    link: list[float] = []
    preview: list[float] = []
    confirm: list[float] = []
    try:
        await bench.link_batch()  # warm-up: connections, prepared statements
        await bench.archive_batch()
        for run in range(args.runs):
            await wait_for_quiet(args.quiet, args.max_wait)
            link.append(await bench.link_batch())
            previewed, confirmed = await bench.archive_batch()
            preview.append(previewed)
            confirm.append(confirmed)
            print(
                f"run {run + 1}: link_batch {link[-1] * 1000:.0f} ms, archive_batch preview "
                f"{previewed * 1000:.0f} ms, confirm {confirmed * 1000:.0f} ms"
            )
    finally:
        await bench.teardown()
    load_end = os.getloadavg()[0]
    results = {
        "batch": BATCH,
        "runs": args.runs,
        "link_batch": summary(link),
        "archive_batch_preview": summary(preview),
        "archive_batch_confirm": summary(confirm),
        "load_average": [round(load_start, 2), round(load_end, 2)],
    }
    print(f"load average at end: {load_end:.2f}")
    print(f"\n{'call (1000 items)':<28}{'median ms':>11}{'min':>9}{'max':>9}{'ms/item':>10}")
    for name in ("link_batch", "archive_batch_preview", "archive_batch_confirm"):
        row = results[name]
        print(
            f"{name:<28}{row['median_ms']:>11.1f}{row['min_ms']:>9.1f}{row['max_ms']:>9.1f}{row['per_item_ms']:>10.3f}"
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--quiet",
        type=float,
        default=0.5,
        help="start each run only when the machine's CPUs are at most this busy (1 = never wait)",
    )
    parser.add_argument("--max-wait", type=float, default=60, help="seconds to wait for a quiet machine")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="synapto-bench-") as tmp:
        embedded = None
        url = os.environ.get("SYNAPTO_DATABASE_URL")
        if not url:
            embedded = EmbeddedPostgres(Path(tmp) / "pg", delete_on_stop=True)
            url = embedded.start()
        try:
            migrations.upgrade(url)
            results = asyncio.run(main_async(args, url))
        finally:
            if embedded is not None:
                embedded.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
